// Package metrics exposes a Countersign deployment's metrics in the
// Prometheus format, through github.com/prometheus/client_golang, on a
// private registry (never the global one) that also carries the Go runtime
// and process collectors.
//
// [New] makes the metrics; its methods are hooks that plug into the
// library's observation points, and [Metrics.Handler] serves them:
//
//	m := metrics.New(nil)
//	st, _ := pebblestore.Open(dir, &pebblestore.Options{
//		OnCommit: func(ci pebblestore.CommitInfo) { m.ObserveStoreCommit(ci.Txns, ci.Sync, ci.Err) },
//	})
//	lg, _ := audit.Open(ctx, st, key, &audit.Options{Committed: m.ObserveEntries})
//	d, _ := webhook.NewDispatcher(st, lg, eps, &webhook.DispatcherOptions{OnDelivery: m.ObserveWebhookDelivery})
//	_ = m.WatchOutbox(d)
//	_ = m.WatchHub(hub)
//	h, _ := httpserver.New(httpserver.Config{..., Metrics: m})
//	go http.ListenAndServe("127.0.0.1:9090", m.Handler()) // operators only
//
// The package imports neither the store drivers nor the server, so an
// embedder that uses neither does not link them.
//
// # Metrics
//
//	countersign_http_requests_total{operation,code}           counter
//	countersign_http_request_duration_seconds{operation}      histogram
//	countersign_gate_decisions_total{outcome}                 counter
//	countersign_settlements_total{outcome}                    counter
//	countersign_record_entries_total{type}                    counter
//	countersign_store_commit_group_size                       histogram
//	countersign_store_commit_seconds                          histogram
//	countersign_store_commit_errors_total                     counter
//	countersign_store_group_run_seconds                       histogram (PostgreSQL)
//	countersign_store_commit_lock_wait_seconds                histogram (PostgreSQL)
//	countersign_webhook_deliveries_total{outcome}             counter
//	countersign_webhook_outbox_depth                          gauge (WatchOutbox)
//	countersign_sse_subscribers                               gauge (WatchHub)
//	countersign_sse_subscribers_dropped_total                 counter (WatchHub)
//
// plus go_*, process_* and promhttp_metric_handler_*.
//
// # Labels and cardinality
//
// Every label has a bounded set of values:
//
//   - operation: a contract operation id (audit.list, pay.create, ...), or
//     "unmatched" for every request no route matched, so that probing
//     random paths adds no series. Series appear on an operation's first
//     request.
//   - code: the status class of the response, "2xx", "3xx", "4xx" or
//     "5xx" ("other" for a status outside 100–599). Not the problem code:
//     operations × problem codes would multiply the series for little a
//     dashboard needs; the problem code of each refusal is in the server's
//     log (with the request id) and, per agent key, in GET /usage.
//   - outcome of gate_decisions_total: allow, confirm, deny, read from the
//     "outcome" member of each gate.decision entry's data ("other" for
//     anything else).
//   - outcome of settlements_total: settled (payment.settled), failed
//     (payment.failed), unknown (payment.outcome_unknown: the rail gave no
//     definite answer; the reconciler finishes it), refunded
//     (payment.refunded).
//   - type of record_entries_total: the entry type, which the code fixes;
//     at most [MaxEntryTypes] distinct values, then "other".
//   - outcome of webhook_deliveries_total: delivered, retrying, failed
//     (given up).
//
// The request duration of audit.stream is the stream's lifetime, and
// counts when the stream ends.
//
// Record metrics count entries as their transactions commit in this
// process; they start at zero on every start, like every counter, and do
// not replay the record.
//
// # Who may read them
//
// Metrics are for the operator, never for agents: request rates per
// operation, payment outcomes and webhook backlogs describe every agent's
// activity, not only the caller's. The reference server therefore never
// serves them on the API listener, whatever credential a request carries;
// `countersign serve --metrics-addr HOST:PORT` serves GET /metrics on a
// separate listener with no credential, to be bound where only the
// operator's monitoring reaches it.
//
// # Adding collectors
//
// Other parts of a deployment (a store driver's connection pool, an MCP
// server's sessions) add their own collectors with [Metrics.Register] or
// through [Metrics.Registry]; a store driver reports its commits through
// [Metrics.ObserveStoreCommit] (txns 1 for a driver without group
// commit). An embedder that serves its own registry gathers both with
// prometheus.Gatherers{own, m.Registry()}.
//
// # Cost
//
// Each request costs two clock reads, one counter increment and one
// histogram observation (atomic operations on series cached per
// operation), and no allocation; see the benchmark in package httpserver.
// Each committed transaction costs a sync.Map load and a counter increment
// per entry, plus a prefix check of a gate decision's data.
package metrics
