package host

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/remoting"
)

func (a *adminAPI) metrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	a.n.metrics.write(w, a.n)
}

func (a *adminAPI) status(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, a.n.Status())
}

// query answers /query with the messages of a topic by key (501 without
// an index that supports it); unparsable numbers count as zero.
func (a *adminAPI) query(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	begin, _ := strconv.ParseInt(q.Get("begin"), 10, 64)
	end, _ := strconv.ParseInt(q.Get("end"), 10, 64)
	max, _ := strconv.Atoi(q.Get("max"))
	recs, err := a.n.QueryByKey(r.Context(), q.Get("topic"), q.Get("key"), max, begin, end)
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, remoting.ErrNotSupported) {
			code = http.StatusNotImplemented
		}
		writeError(w, code, err.Error())
		return
	}
	out := make([]messageJSON, 0, len(recs))
	for _, b := range recs {
		if m, ok := toMessageJSON(b); ok {
			out = append(out, m)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// message answers /message with the message an offset message id names:
// 400 for an id that does not parse, 404 where no message is, 500 where
// the record there is damaged.
func (a *adminAPI) message(w http.ResponseWriter, r *http.Request) {
	_, off, err := record.ParseOffsetMsgID(r.URL.Query().Get("id"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	b, err := a.n.cache.readRecord(a.n.store, off)
	if err == nil {
		var m messageJSON
		if m, err = decodeMessageJSON(b); err == nil {
			writeJSON(w, http.StatusOK, m)
			return
		}
	}
	if errors.Is(err, record.ErrCorrupt) {
		// The id names a record, but the bytes there are damaged: an
		// error of the store, not of the request.
		writeJSON(w, http.StatusInternalServerError, map[string]any{
			"error":  fmt.Sprintf("damaged record at offset %d: %v", off, err),
			"offset": off,
		})
		return
	}
	writeError(w, http.StatusNotFound, err.Error())
}

func (a *adminAPI) promote(w http.ResponseWriter, r *http.Request) {
	ep, err := a.n.Promote(r.Context())
	if err != nil {
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"role": roleMaster, "epoch": ep})
}

func (a *adminAPI) forceWrites(w http.ResponseWriter, r *http.Request) {
	if err := a.n.ForceWrites(r.Context()); err != nil {
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"result": "fence lifted"})
}

type messageJSON struct {
	MsgID          string            `json:"msg_id"`
	Topic          string            `json:"topic"`
	QueueID        int32             `json:"queue_id"`
	QueueOffset    int64             `json:"queue_offset"`
	PhysOffset     int64             `json:"phys_offset"`
	StoreTimestamp int64             `json:"store_timestamp"`
	Properties     map[string]string `json:"properties"`
	Body           string            `json:"body"`
	BodyHex        string            `json:"body_hex,omitempty"`
}

func toMessageJSON(b []byte) (messageJSON, bool) {
	m, err := decodeMessageJSON(b)
	return m, err == nil
}

// decodeMessageJSON decodes a stored record (checking its body CRC) for
// the admin API; the error wraps record.ErrCorrupt when the bytes are
// damaged.
func decodeMessageJSON(b []byte) (messageJSON, error) {
	r, err := record.Decode(b)
	if err != nil {
		return messageJSON{}, fmt.Errorf("decoding record: %w", err)
	}
	props, _ := record.ParseProperties(r.Properties)
	m := messageJSON{
		MsgID: record.OffsetMsgID(r.StoreHost, r.PhysOffset), Topic: r.Topic, QueueID: r.QueueID,
		QueueOffset: r.QueueOffset, PhysOffset: r.PhysOffset, StoreTimestamp: r.StoreTimestamp,
		Properties: props, Body: string(r.Body),
	}
	if r.SysFlag&record.SysFlagCompressed != 0 {
		m.Body, m.BodyHex = "", hex.EncodeToString(r.Body)
	}
	return m, nil
}
