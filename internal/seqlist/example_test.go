package seqlist_test

import (
	"context"
	"fmt"

	"github.com/countersign/countersign/internal/seqlist"
	"github.com/countersign/countersign/store"
	"github.com/countersign/countersign/store/memstore"
)

// A list keyed by the seq of the record entry each item's transaction
// appended pages in commit order: "a" committed last, so it comes after
// the cursor a reader took at "m", though its id sorts first.
func ExamplePage() {
	ctx := context.Background()
	st := memstore.New(nil)
	list := seqlist.Index{Order: "example/order/", Member: "example/member/"}
	put := func(seq uint64, id string) {
		_ = st.Update(ctx, func(txn store.Txn) error { return list.Put(txn, seq, id) })
	}
	read := func(cursor string) (ids []string, next string) {
		after, err := seqlist.ParseCursor(cursor)
		if err != nil {
			panic(err)
		}
		_ = st.View(ctx, func(r store.Reader) error {
			last, more, err := seqlist.Page(r, list.Order, after, 1, func(id string, _ []byte) (bool, error) {
				ids = append(ids, id)
				return true, nil
			})
			if more {
				next = last.Cursor()
			}
			return err
		})
		return ids, next
	}

	put(7, "m")
	put(8, "z")
	page, cursor := read("")
	fmt.Println(page)
	put(9, "a")
	for cursor != "" {
		page, cursor = read(cursor)
		fmt.Println(page)
	}
	// Output:
	// [m]
	// [z]
	// [a]
}
