// Package filter is RocketMQ's SQL92 message selector: the subset of the
// JMS selector grammar a consumer subscribes with
// (MessageSelector{Type: SQL92}), compiled once and evaluated on the broker
// over a message's properties.
//
// # Grammar
//
// Keywords are case-insensitive: AND OR NOT BETWEEN IN IS NULL TRUE FALSE
// CONTAINS STARTSWITH ENDSWITH. From loosest to tightest:
//
//	OR
//	AND
//	=  <>  IS [NOT] NULL
//	>  >=  <  <=  [NOT] BETWEEN x AND y  [NOT] IN ('s', ...)  [NOT] CONTAINS|STARTSWITH|ENDSWITH 's'
//	unary + - NOT
//	literal, identifier, ( expression )
//
// Literals are integers ("0" or a decimal without leading zeros, with an
// optional L: an Integer when it fits in 32 bits, else a Long, and an error
// beyond 64 bits), floats (5.5, 5., .5, 5E10; a Double, which must be
// positive and finite), single-quoted strings (a doubled quote inside is
// one quote), TRUE, FALSE and NULL. Identifiers are [A-Za-z_$][A-Za-z0-9_$]*: a name with '.', '-'
// or '#' cannot be written. "--" to the end of a line and "/* */" are
// comments. There is no arithmetic and no LIKE.
//
// Compile refuses what RocketMQ refuses when it compiles: an expression
// that is not a condition (a bare literal), a string, boolean or NULL
// constant or a condition under > >= < <= or BETWEEN, NULL under = or <>
// (write IS NULL), TRUE or FALSE compared with another kind of constant,
// IN after anything but a property, and BETWEEN whose constant bounds are
// in the wrong order.
//
// # Evaluation
//
// Evaluation is RocketMQ's, three-valued (true, false, unknown). Every
// property of the stored record is visible under its exact name, system
// ones included (TAGS, KEYS, UNIQ_KEY, ...), and its value is a string; a
// missing property is NULL. A message matches only when the expression is
// true: unknown does not match, and neither does an expression whose
// evaluation fails.
//
//   - A property compared with a number is converted to the number's type
//     (Java's Integer.valueOf, Long.valueOf or Double.valueOf); if it does
//     not parse, the evaluation fails. Integer and Long widen to Long,
//     either to Double. Two properties under > >= < <= are compared as
//     Doubles, or the evaluation fails.
//   - = with NULL on the left is unknown; with NULL only on the right it
//     is false; with NULL on both sides it is true. <> is NOT =, and
//     NOT unknown is unknown.
//   - > >= < <= with a NULL side are unknown.
//   - [NOT] IN is unknown for a missing property.
//   - [NOT] CONTAINS, STARTSWITH and ENDSWITH are false for a missing
//     property and for an empty search string.
//   - A property used as a condition (WHERE a) is false when present
//     (its value is a string, not a boolean) and unknown when missing.
//   - AND and OR are three-valued and evaluate their left side first,
//     skipping the right side when the left decides.
//
// A Selector is immutable and safe for concurrent use. Cache compiles each
// distinct expression once.
package filter
