// Package commithook keeps the functions registered through
// [store.Committer.BeforeCommit], for the drivers in this module, so that
// every driver deduplicates and orders them the same way.
package commithook

import "github.com/countersign/countersign/store"

type hook struct {
	key any
	fn  func(store.Txn) error
}

// List is the hooks of one transaction or one commit, in registration
// order, one per key. The zero value is empty.
type List struct {
	hooks []hook
}

// Add registers fn under key unless key is already registered.
func (l *List) Add(key any, fn func(store.Txn) error) {
	for _, h := range l.hooks {
		if h.key == key {
			return
		}
	}
	l.hooks = append(l.hooks, hook{key: key, fn: fn})
}

// Merge adds every hook of o, in o's order.
func (l *List) Merge(o *List) {
	for _, h := range o.hooks {
		l.Add(h.key, h.fn)
	}
}

// Len is the number of hooks.
func (l *List) Len() int { return len(l.hooks) }

// Run runs every hook against txn in order and stops at the first error.
func (l *List) Run(txn store.Txn) error {
	for _, h := range l.hooks {
		if err := h.fn(txn); err != nil {
			return err
		}
	}
	return nil
}

// Reset empties the list, keeping its storage.
func (l *List) Reset() {
	clear(l.hooks)
	l.hooks = l.hooks[:0]
}
