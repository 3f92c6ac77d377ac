package remoting

// Serialize types carried in the top byte of a frame's header-info word.
const (
	// SerializeJSON marks a JSON header. It is what every Go client sends and
	// what Java sends by default.
	SerializeJSON byte = 0
	// SerializeRocketMQ marks RocketMQ's compact binary header, used by Java
	// peers started with rocketmq.serialize.type=ROCKETMQ.
	SerializeRocketMQ byte = 1
)

// Flag bits of Command.Flag.
const (
	// FlagResponse (bit 0) marks a response; it is clear on requests.
	FlagResponse int32 = 1
	// FlagOneway (bit 1) marks a request that expects no response.
	FlagOneway int32 = 2
)

// ServerVersion is the protocol version keel puts in the commands it creates.
// 317 is the value rocketmq-client-go sends; clients only record it.
const ServerVersion int32 = 317

// ServerLanguage is the language keel reports in the commands it creates.
// "JAVA" is accepted by every client, including old Java ones that reject
// unknown language names.
const ServerLanguage = "JAVA"

// Command is one remoting command: a request, a response, or a oneway
// request. The zero value is a request with code 0 and no header fields.
type Command struct {
	// Code is the request code on requests and the response code on
	// responses.
	Code int16
	// Language names the sender's client language ("GO", "JAVA", ...).
	// Decoding accepts any JSON value and never fails on it.
	Language string
	// Version is the sender's protocol version.
	Version int32
	// Opaque is the request id; a response carries its request's opaque.
	Opaque int32
	// Flag holds FlagResponse and FlagOneway.
	Flag int32
	// Remark is free text, usually the error message of a failed response.
	Remark string
	// ExtFields holds the custom header fields. On output they are written
	// sorted by key, each key once (its last value), the values always as
	// JSON strings, which is what rocketmq-client-go requires.
	ExtFields Fields
	// Body is the payload after the header; nil and empty are equivalent.
	Body []byte
	// SerializeType is the header encoding: SerializeJSON or
	// SerializeRocketMQ. It is set by ReadCommand and honoured on output.
	SerializeType byte
}

// IsResponse reports whether the response bit is set.
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports whether the oneway bit is set.
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// Ext returns the extension field k, or "" if absent.
func (c *Command) Ext(k string) string {
	v, _ := c.ExtFields.Get(k)
	return v
}

// SetExt sets extension field k to v.
func (c *Command) SetExt(k, v string) { c.ExtFields.Set(k, v) }

// NewResponse returns a response to req with the given code and remark,
// carrying req's opaque and serialize type.
func NewResponse(req *Command, code int16, remark string) *Command {
	return &Command{
		Code:          code,
		Language:      ServerLanguage,
		Version:       ServerVersion,
		Opaque:        req.Opaque,
		Flag:          FlagResponse,
		Remark:        remark,
		SerializeType: req.SerializeType,
	}
}

func (c *Command) language() string {
	if c.Language == "" {
		return ServerLanguage
	}
	return c.Language
}
