package pay

import (
	"context"
	"encoding/base64"
	"time"

	"github.com/countersign/countersign/audit"
	"github.com/countersign/countersign/internal/ids"
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
// first. The cursor is the previous page's NextCursor ("" to start); limit
// is 1..100 (0 means 20).
func (s *Service) Settling(ctx context.Context, cursor string, limit int) (SettlingPage, error) {
	if limit == 0 {
		limit = 20
	}
	if limit < 1 || limit > 100 {
		return SettlingPage{}, audit.ErrBadLimit
	}
	lower := []byte(keySettling)
	if cursor != "" {
		after, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || !ids.Valid(ids.Intent, string(after)) {
			return SettlingPage{}, audit.ErrBadCursor
		}
		lower = append([]byte(keySettling+string(after)), 0)
	}
	page := SettlingPage{Data: []SettlingIntent{}}
	now := s.now()
	err := s.st.View(ctx, func(r store.Reader) error {
		it := r.Iterate(lower, store.PrefixEnd([]byte(keySettling)), false)
		defer it.Close()
		for it.Next() {
			if len(page.Data) == limit {
				page.HasMore = true
				break
			}
			in, err := getIntent(r, string(it.Key()[len(keySettling):]))
			if err != nil {
				return err
			}
			in.Links = s.links(in.ID)
			page.Data = append(page.Data, SettlingIntent{Intent: *in, AgeSeconds: int64(now.Sub(in.UpdatedAt) / time.Second)})
		}
		return it.Err()
	})
	if err != nil {
		return SettlingPage{}, err
	}
	if page.HasMore {
		c := base64.RawURLEncoding.EncodeToString([]byte(page.Data[len(page.Data)-1].ID))
		page.NextCursor = &c
	}
	return page, nil
}
