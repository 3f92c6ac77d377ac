package filter

import (
	"cmp"
	"math"
	"strconv"
	"strings"
)

// kind is the Java type of a value.
type kind uint8

const (
	kNull   kind = iota // null: a missing property, NULL, an unknown condition
	kBool               // java.lang.Boolean
	kInt                // java.lang.Integer
	kLong               // java.lang.Long
	kDouble             // java.lang.Double
	kString             // java.lang.String
)

// value is the result of evaluating an expression.
type value struct {
	k kind
	b bool
	n int64 // kInt (within int32) and kLong
	f float64
	s string
}

var (
	null      = value{}
	trueValue = value{k: kBool, b: true}
	falseVal  = value{k: kBool}
)

func boolValue(b bool) value { return value{k: kBool, b: b} }

func (v value) isNumber() bool { return v.k == kInt || v.k == kLong || v.k == kDouble }

func (v value) String() string {
	switch v.k {
	case kBool:
		if v.b {
			return "TRUE"
		}
		return "FALSE"
	case kInt, kLong:
		return strconv.FormatInt(v.n, 10)
	case kDouble:
		return strconv.FormatFloat(v.f, 'g', -1, 64)
	case kString:
		return "'" + strings.ReplaceAll(v.s, "'", "''") + "'"
	}
	return "NULL"
}

// equals is Java's Object.equals: same type and same value (Double by its
// bits, so NaN equals NaN and 0.0 does not equal -0.0).
func (v value) equals(w value) bool {
	if v.k != w.k {
		return false
	}
	switch v.k {
	case kBool:
		return v.b == w.b
	case kInt, kLong:
		return v.n == w.n
	case kDouble:
		return javaDoubleBits(v.f) == javaDoubleBits(w.f)
	case kString:
		return v.s == w.s
	}
	return true
}

// compareValues orders two non-null values as RocketMQ does: values of
// different types are first converted towards each other (Integer to Long,
// either to Double, a String to the other side's type); a pair it cannot
// convert compares as -1 (less), and a String that does not parse as the
// other side's number fails the evaluation.
func compareValues(v, w value) (int, error) {
	if v.k != w.k {
		var err error
		switch v.k {
		case kBool:
			if w.k == kString {
				// RocketMQ casts the Boolean to a String here and fails.
				return 0, evalErr("cannot compare %s with %s", v, w)
			}
			return -1, nil
		case kInt, kLong:
			switch w.k {
			case kInt, kLong:
				// Both widen to Long.
			case kDouble:
				v = value{k: kDouble, f: float64(v.n)}
			case kString:
				w, err = parseAs(w.s, v.k)
			default:
				return -1, nil
			}
		case kDouble:
			switch w.k {
			case kInt, kLong:
				w = value{k: kDouble, f: float64(w.n)}
			case kString:
				w, err = parseAs(w.s, kDouble)
			default:
				return -1, nil
			}
		case kString:
			if w.k == kNull {
				return -1, nil
			}
			v, err = parseAs(v.s, w.k)
		default:
			return -1, nil
		}
		if err != nil {
			return 0, err
		}
	}
	switch v.k {
	case kBool:
		return cmpBool(v.b, w.b), nil
	case kInt, kLong:
		return cmp.Compare(v.n, w.n), nil
	case kDouble:
		return javaCompareDouble(v.f, w.f), nil
	case kString:
		return strings.Compare(v.s, w.s), nil
	}
	return 0, nil
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// parseAs converts a property's string to k as Java's Boolean.valueOf,
// Integer.valueOf, Long.valueOf or Double.valueOf would.
func parseAs(s string, k kind) (value, error) {
	switch k {
	case kBool:
		return boolValue(strings.EqualFold(s, "true")), nil
	case kInt:
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return null, evalErr("%q is not an Integer", s)
		}
		return value{k: kInt, n: n}, nil
	case kLong:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return null, evalErr("%q is not a Long", s)
		}
		return value{k: kLong, n: n}, nil
	case kDouble:
		f, ok := javaParseDouble(s)
		if !ok {
			return null, evalErr("%q is not a Double", s)
		}
		return value{k: kDouble, f: f}, nil
	}
	return value{k: kString, s: s}, nil
}

// javaParseDouble is Java's Double.valueOf: surrounding characters up to
// ' ' are trimmed; then an optional sign and "NaN", "Infinity", or a
// decimal or hexadecimal (0x...p...) floating-point number with an
// optional f, F, d or D suffix.
func javaParseDouble(s string) (float64, bool) {
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 || body == "" || strings.ContainsRune(body, '_') {
		return 0, false
	}
	switch body {
	case "NaN":
		return math.NaN(), true
	case "Infinity":
		if s[0] == '-' {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	if c := body[0]; c != '.' && !isDigit(c) {
		return 0, false // also refuses Go's "inf" and "nan"
	}
	if last := s[len(s)-1]; strings.IndexByte("fFdD", last) >= 0 {
		hex := strings.HasPrefix(body, "0x") || strings.HasPrefix(body, "0X")
		if !hex || strings.ContainsAny(body, "pP") {
			s = s[:len(s)-1]
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// Java rounds an out-of-range literal to Infinity or 0 instead of
		// refusing it.
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return f, true
		}
		return 0, false
	}
	return f, true
}

// javaDoubleBits is Java's Double.doubleToLongBits: every NaN is one.
func javaDoubleBits(f float64) uint64 {
	if math.IsNaN(f) {
		return 0x7ff8000000000000
	}
	return math.Float64bits(f)
}

// javaCompareDouble is Java's Double.compare: -0.0 < 0.0, and NaN equals
// itself and is greater than everything else.
func javaCompareDouble(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	x, y := int64(javaDoubleBits(a)), int64(javaDoubleBits(b))
	return cmp.Compare(x, y)
}
