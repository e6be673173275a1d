package pay

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/ids"
	"github.com/countersign/countersign/internal/seqlist"
	"github.com/countersign/countersign/store"
)

// SettlingIntent is a payment whose settlement outcome is not known yet:
// the rail (or a merchant completing a purchase) gave no definite answer,
// so no money is reported moved and none is released. The reconciler asks
// the rail every minute; an operator sees them here.
type SettlingIntent struct {
	Intent
	// AgeSeconds is how long it has been settling.
	AgeSeconds int64 `json:"ageSeconds"`
}

// SettlingPage is one page of settling intents, oldest first.
type SettlingPage struct {
	Data       []SettlingIntent `json:"data"`
	HasMore    bool             `json:"hasMore"`
	NextCursor *string          `json:"nextCursor"`
}

// Settling lists the payments whose outcome is not known yet, oldest
// first: in the order they started settling, so that a payment that
// starts after a page was read is on a later page, whatever its id. The
// cursor is the previous page's NextCursor ("" to start); limit is 1..100
// (0 means 20).
func (s *Service) Settling(ctx context.Context, cursor string, limit int) (SettlingPage, error) {
	page := SettlingPage{Data: []SettlingIntent{}}
	now := s.now()
	next, err := s.pageList(ctx, settlingList, cursor, limit, func(_ store.Reader, in *Intent) (bool, error) {
		in.Links = s.links(in.ID)
		page.Data = append(page.Data, SettlingIntent{Intent: *in, AgeSeconds: int64(now.Sub(in.UpdatedAt) / time.Second)})
		return true, nil
	}, func(store.Reader) { page.Data = page.Data[:0] })
	if err != nil {
		return SettlingPage{}, err
	}
	page.HasMore, page.NextCursor = next != nil, next
	return page, nil
}

// pageList reads a page of the intents of list (heldList, settlingList)
// after cursor, in commit order, calling add for each until it took limit
// of them: add reports whether it took the intent, and a filter returns
// false (the intent does not count, and the cursor never names it). reset
// undoes the adds of an earlier attempt. Both are given the view the page
// is read in, for what add reads beside the intent. It returns the next page's
// cursor, nil on the last page; when add filters, the next page may be
// empty (an intent followed, add was not asked about it). limit is 1..100
// (0 means 20); a bad one is audit.ErrBadLimit, a cursor no page returned
// audit.ErrBadCursor.
func (s *Service) pageList(ctx context.Context, list seqlist.Index, cursor string, limit int, add func(store.Reader, *Intent) (bool, error), reset func(store.Reader)) (*string, error) {
	if limit == 0 {
		limit = 20
	}
	if limit < 1 || limit > 100 {
		return nil, audit.ErrBadLimit
	}
	after, err := seqlist.ParseCursor(cursor)
	if err != nil || (cursor != "" && !ids.Valid(ids.Intent, after.ID)) {
		return nil, audit.ErrBadCursor
	}
	if err := s.migrateLists(ctx); err != nil {
		return nil, err
	}
	var (
		last seqlist.Pos
		more bool
	)
	err = s.st.View(ctx, func(r store.Reader) error {
		reset(r)
		var err error
		last, more, err = seqlist.Page(r, list.Order, after, limit, func(id string, _ []byte) (bool, error) {
			in, err := getIntent(r, id)
			if err != nil {
				return false, err
			}
			return add(r, in)
		})
		return err
	})
	if err != nil || !more {
		return nil, err
	}
	c := last.Cursor()
	return &c, nil
}

// migrateLists gives the held and settling intents of a store written
// before those lists followed commit order their order rows, at seq 0:
// first, by id, as they were listed. It runs once per store, at the first
// Reconcile or list.
func (s *Service) migrateLists(ctx context.Context) error {
	err := s.lists.Run(ctx, s.st, keyListLayout, func(txn store.Txn) (bool, error) {
		held, err := heldList.Backfill(txn)
		if err != nil {
			return false, err
		}
		settling, err := settlingList.Backfill(txn)
		return held || settling, err
	})
	if err != nil {
		return fmt.Errorf("pay: %w", err)
	}
	return nil
}
