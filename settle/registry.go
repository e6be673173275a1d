package settle

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Registry maps rail names to rails. The zero value is an empty registry
// ready to use. A Registry is safe for concurrent use by multiple goroutines
// and must not be copied after first use.
//
// Rails are registered once, at start-up, and never removed: a payment that
// was sent to a rail must be able to find that rail again to be reconciled
// or refunded.
type Registry struct {
	// mu guards rails: Register writes while requests read concurrently.
	mu    sync.RWMutex
	rails map[string]Rail
}

// Register adds r under r.Name(). It fails if r is nil, if its name or
// facts are invalid, or, with an error matching [ErrDuplicateRail], if a
// rail of that name is already registered.
func (g *Registry) Register(r Rail) error {
	if r == nil {
		return errors.New("settle: register: nil rail")
	}
	name := r.Name()
	if err := ValidateName(name); err != nil {
		return fmt.Errorf("settle: register: %w", err)
	}
	if err := r.Facts().Validate(); err != nil {
		return fmt.Errorf("settle: register %q: %w", name, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.rails[name]; ok {
		return fmt.Errorf("settle: register %q: %w", name, ErrDuplicateRail)
	}
	if g.rails == nil {
		g.rails = make(map[string]Rail)
	}
	g.rails[name] = r
	return nil
}

// Get returns the rail registered under name, or an error matching
// [ErrUnknownRail].
func (g *Registry) Get(name string) (Rail, error) {
	g.mu.RLock()
	r, ok := g.rails[name]
	g.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("settle: rail %q: %w", name, ErrUnknownRail)
	}
	return r, nil
}

// Names returns the registered names in ascending order.
func (g *Registry) Names() []string {
	g.mu.RLock()
	names := make([]string, 0, len(g.rails))
	for name := range g.rails {
		names = append(names, name)
	}
	g.mu.RUnlock()
	slices.Sort(names)
	return names
}
