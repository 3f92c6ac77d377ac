package filter

import (
	"fmt"
	"strings"
)

// Properties looks a message property up by its exact name and reports
// whether the message has it.
type Properties func(name string) (value string, ok bool)

// node is one compiled expression. eval evaluates it over props; an error
// (wrapping ErrEval) aborts the whole evaluation, as a Java exception does.
type node interface {
	eval(props Properties) (value, error)
	String() string
}

// constNode is a literal. TRUE, FALSE and NULL are boolean constants.
type constNode struct{ v value }

func (n *constNode) eval(Properties) (value, error) { return n.v, nil }
func (n *constNode) String() string                 { return n.v.String() }

// isBool reports whether the constant is TRUE, FALSE or NULL (RocketMQ's
// BooleanConstantExpression).
func (n *constNode) isBool() bool { return n.v.k == kBool || n.v.k == kNull }

// propNode is a property reference; its value is the property's string,
// or null when the message does not have it.
type propNode struct{ name string }

func (n *propNode) eval(props Properties) (value, error) {
	if s, ok := props(n.name); ok {
		return value{k: kString, s: s}, nil
	}
	return null, nil
}
func (n *propNode) String() string { return n.name }

// negNode is unary minus: a number negated (Java's wrap-around for the
// smallest Integer and Long), null for anything else.
type negNode struct{ x node }

func (n *negNode) eval(props Properties) (value, error) {
	v, err := n.x.eval(props)
	if err != nil {
		return null, err
	}
	switch v.k {
	case kInt:
		return value{k: kInt, n: int64(-int32(v.n))}, nil
	case kLong:
		return value{k: kLong, n: -v.n}, nil
	case kDouble:
		return value{k: kDouble, f: -v.f}, nil
	}
	return null, nil
}
func (n *negNode) String() string { return "(- " + n.x.String() + ")" }

// notNode is NOT over a condition: unknown stays unknown.
type notNode struct{ x node }

func (n *notNode) eval(props Properties) (value, error) {
	v, err := n.x.eval(props)
	if err != nil || v.k != kBool {
		return null, err
	}
	return boolValue(!v.b), nil
}
func (n *notNode) String() string { return "NOT " + n.x.String() }

// castNode is a property used as a condition: unknown when missing, false
// when present (a property's value is a string, never a boolean).
type castNode struct{ x node }

func (n *castNode) eval(props Properties) (value, error) {
	v, err := n.x.eval(props)
	if err != nil || v.k == kNull {
		return null, err
	}
	if v.k != kBool {
		return falseVal, nil
	}
	return v, nil
}
func (n *castNode) String() string { return n.x.String() }

// andNode and orNode are three-valued; the right side is evaluated only
// when the left does not decide.
type andNode struct{ l, r node }

func (n *andNode) eval(props Properties) (value, error) {
	lv, err := n.l.eval(props)
	if err != nil || lv.k == kBool && !lv.b {
		return falseVal, err
	}
	rv, err := n.r.eval(props)
	if err != nil || rv.k == kBool && !rv.b {
		return falseVal, err
	}
	if lv.k == kNull || rv.k == kNull {
		return null, nil
	}
	return trueValue, nil
}
func (n *andNode) String() string { return "(" + n.l.String() + " AND " + n.r.String() + ")" }

type orNode struct{ l, r node }

func (n *orNode) eval(props Properties) (value, error) {
	lv, err := n.l.eval(props)
	if err != nil || lv.k == kBool && lv.b {
		return trueValue, err
	}
	rv, err := n.r.eval(props)
	if err != nil || rv.k == kBool && rv.b {
		return trueValue, err
	}
	if lv.k == kNull || rv.k == kNull {
		return null, nil
	}
	return falseVal, nil
}
func (n *orNode) String() string { return "(" + n.l.String() + " OR " + n.r.String() + ")" }

// eqNode is = (and IS NULL, which is = against the NULL constant without
// the compile-time check). Both sides are evaluated, left first.
type eqNode struct{ l, r node }

func (n *eqNode) eval(props Properties) (value, error) {
	lv, err := n.l.eval(props)
	if err != nil {
		return null, err
	}
	rv, err := n.r.eval(props)
	if err != nil {
		return null, err
	}
	switch {
	case lv.k == kNull && rv.k == kNull:
		return trueValue, nil
	case lv.k == kNull:
		return null, nil
	case rv.k == kNull:
		return falseVal, nil
	case lv.equals(rv):
		return trueValue, nil
	}
	c, err := compareValues(lv, rv)
	if err != nil {
		return null, err
	}
	return boolValue(c == 0), nil
}
func (n *eqNode) String() string { return "(" + n.l.String() + " = " + n.r.String() + ")" }

// cmpNode is > >= < or <=. A null side (the left checked first) makes it
// unknown; two strings are compared as Doubles.
type cmpNode struct {
	op   string
	l, r node
}

func (n *cmpNode) eval(props Properties) (value, error) {
	lv, err := n.l.eval(props)
	if err != nil || lv.k == kNull {
		return null, err
	}
	rv, err := n.r.eval(props)
	if err != nil || rv.k == kNull {
		return null, err
	}
	if lv.k == kString && rv.k == kString {
		a, aok := javaParseDouble(lv.s)
		b, bok := javaParseDouble(rv.s)
		if !aok || !bok {
			return null, evalErr("it is illegal to compare strings by %s: %s, %s", n.op, lv, rv)
		}
		lv, rv = value{k: kDouble, f: a}, value{k: kDouble, f: b}
	}
	c, err := compareValues(lv, rv)
	if err != nil {
		return null, err
	}
	switch n.op {
	case ">":
		return boolValue(c > 0), nil
	case ">=":
		return boolValue(c >= 0), nil
	case "<":
		return boolValue(c < 0), nil
	}
	return boolValue(c <= 0), nil
}
func (n *cmpNode) String() string { return "(" + n.l.String() + " " + n.op + " " + n.r.String() + ")" }

// inNode is [NOT] IN over a property: unknown when the property is missing.
type inNode struct {
	prop *propNode
	set  map[string]struct{}
	not  bool
}

func (n *inNode) eval(props Properties) (value, error) {
	v, _ := n.prop.eval(props)
	if v.k != kString {
		return null, nil
	}
	_, in := n.set[v.s]
	return boolValue(in != n.not), nil
}

func (n *inNode) String() string {
	var b strings.Builder
	b.WriteString(n.prop.name)
	if n.not {
		b.WriteString(" NOT")
	}
	b.WriteString(" IN (")
	i := 0
	for s := range n.set {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(value{k: kString, s: s}.String())
		i++
	}
	b.WriteString(")")
	return b.String()
}

// strNode is [NOT] CONTAINS, STARTSWITH or ENDSWITH: false for an empty
// search string and for a side that is not a string (a missing property
// included).
type strNode struct {
	op     string // CONTAINS, STARTSWITH or ENDSWITH
	x      node
	search string
	not    bool
}

func (n *strNode) eval(props Properties) (value, error) {
	if n.search == "" {
		return falseVal, nil
	}
	v, err := n.x.eval(props)
	if err != nil || v.k != kString {
		return falseVal, err
	}
	var hit bool
	switch n.op {
	case "CONTAINS":
		hit = strings.Contains(v.s, n.search)
	case "STARTSWITH":
		hit = strings.HasPrefix(v.s, n.search)
	default:
		hit = strings.HasSuffix(v.s, n.search)
	}
	return boolValue(hit != n.not), nil
}

func (n *strNode) String() string {
	not := ""
	if n.not {
		not = "NOT "
	}
	return fmt.Sprintf("(%s %s%s %s)", n.x, not, n.op, value{k: kString, s: n.search})
}

// isCondition reports whether n yields a boolean (RocketMQ's
// BooleanExpression): every comparison and logical operator, and the
// TRUE, FALSE and NULL constants.
func isCondition(n node) bool {
	switch n := n.(type) {
	case *constNode:
		return n.isBool()
	case *propNode, *negNode:
		return false
	}
	return true
}
