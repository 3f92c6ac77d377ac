package host

import (
	"time"

	"github.com/keelmq/keel/host/remoting"
	"github.com/keelmq/keel/host/txn"
)

// newTxn is the transaction service over the node's store: it reads half
// and op records from the store, appends through the node's write path (so
// the write gate applies; its messages are addressed to the transaction
// topics, which Append does not rewrite), keeps its progress in the
// consumer offset table, and checks producers through the broker (which
// listen creates; checks run only after it has).
func (n *Node) newTxn() *txn.Service {
	st := n.prof.Store
	return txn.New(txn.Config{
		Log:     n.store,
		Offsets: n.store.Meta().ConsumerOffsets,
		Append:  n.serviceAppend,
		Check: func(group string, c txn.Check) error {
			b := n.broker // set by listen, before the service starts
			if b == nil {
				return remoting.ErrServiceUnavailable
			}
			return b.CheckTransactionState(group, c)
		},
		Flush:     n.serviceFlush,
		Interval:  time.Duration(st.TransactionCheckInterval),
		Timeout:   time.Duration(st.TransactionTimeout),
		MaxChecks: st.TransactionCheckMax,
		Logger:    n.log.With("component", "txn"),
	})
}

// transactions is what the broker decides END_TRANSACTION with: nil until
// the store is open.
func (n *Node) transactions() remoting.Transactions {
	if n.txn == nil {
		return nil
	}
	return n.txn
}
