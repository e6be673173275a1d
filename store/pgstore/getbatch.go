package pgstore

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Views' first reads of one key, batched.
//
// Most Views read one key (a credential, an intent) and nothing more, and
// each used to cost a statement of its own: a connection taken from the
// pool, a round trip, and PostgreSQL's work of one statement. Measured on
// the money path, the credential's View was 14 % of the server's CPU and
// the one store call per payment that the group commit could not share.
// So a View's first read of one key, the statement that runs alone and is
// a snapshot by itself, goes to one of getWorkers goroutines, which read
// every key waiting then in one statement (k = ANY), as the committer
// commits every Update waiting. The statement begins after every View it
// answers began, so each still reads a snapshot taken after it started.
// A lone View waits for no one: a worker that is free sends it at once.

// getWorkers is how many batched reads may be in flight at once: two, so
// that a View arriving while one batch is out does not wait for its
// answer. Each has a connection of its own, outside the pool: the Views
// waiting for a worker hold pool connections (so that a second
// statement is sent at once), and a worker waiting for one of those
// could wait for ever.
const getWorkers = 2

// maxGetBatch bounds the keys read by one statement.
const maxGetBatch = 256

// getReq is one View's first read, waiting for a worker.
type getReq struct {
	key   []byte
	v     []byte
	found bool
	err   error
	done  chan struct{}
}

// getBatcher is the Store's batching of Views' first reads.
type getBatcher struct {
	gets     chan *getReq
	stopGets chan struct{}
	getsDone sync.WaitGroup
}

func (s *Store) startGets() {
	s.gets = make(chan *getReq, maxGetBatch)
	s.stopGets = make(chan struct{})
	for range getWorkers {
		s.getsDone.Go(s.getWorker)
	}
}

// stopGetWorkers stops the workers; no View may be in flight.
func (s *Store) stopGetWorkers() {
	close(s.stopGets)
	s.getsDone.Wait()
}

// batchGet reads key as a View's first statement: the value and whether
// the key is present.
func (s *Store) batchGet(ctx context.Context, key []byte) ([]byte, bool, error) {
	r := &getReq{key: key, done: make(chan struct{})}
	select {
	case s.gets <- r:
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
	select {
	case <-r.done:
		return r.v, r.found, r.err
	case <-ctx.Done():
		return nil, false, ctx.Err() // the worker answers no one
	}
}

func (s *Store) getWorker() {
	w := &getConn{s: s}
	defer w.close()
	for {
		var first *getReq
		select {
		case first = <-s.gets:
		case <-s.stopGets:
			return
		}
		batch := []*getReq{first}
	gather:
		for len(batch) < maxGetBatch {
			select {
			case r := <-s.gets:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		w.readBatch(batch)
	}
}

// getConn is a worker's connection, made when first needed and again
// after one fails.
type getConn struct {
	s    *Store
	conn *pgx.Conn
}

func (w *getConn) query(ctx context.Context, keys [][]byte) ([]row, error) {
	if w.conn == nil {
		c, err := pgx.ConnectConfig(ctx, w.s.pool.Config().ConnConfig.Copy())
		if err == nil {
			err = sessionSettings(ctx, c)
			if err != nil {
				_ = c.Close(ctx)
			}
		}
		if err != nil {
			return nil, err
		}
		w.conn = c
	}
	rows, err := queryRows(w.conn.Query(ctx, w.s.q.getMany, pgtype.FlatArray[[]byte](keys)))
	if err != nil {
		w.close() // a fresh one next time, whatever went wrong
	}
	return rows, err
}

func (w *getConn) close() {
	if w.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = w.conn.Close(ctx)
		cancel()
		w.conn = nil
	}
}

// readBatch reads the keys of batch in one statement and answers each.
func (w *getConn) readBatch(batch []*getReq) {
	keys := make([][]byte, 0, len(batch))
	seen := make(map[string]int, len(batch))
	for _, r := range batch {
		seen[string(r.key)]++
		if seen[string(r.key)] == 1 {
			keys = append(keys, r.key)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), roundTrip)
	defer cancel()
	rows, err := w.query(ctx, keys)
	values := make(map[string][]byte, len(rows))
	for _, row := range rows {
		values[string(row.k)] = row.v
	}
	for _, r := range batch {
		if err != nil {
			r.err = err
		} else if v, ok := values[string(r.key)]; ok {
			if seen[string(r.key)] > 1 {
				v = clone(v) // each caller may modify what it is given
			}
			r.v, r.found = v, true
		}
		close(r.done)
	}
}
