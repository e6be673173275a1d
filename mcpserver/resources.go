package mcpserver

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agentclient"
	"github.com/countersign/countersign/pay"
)

const (
	waitToolName   = "wait_for_decision"
	mandateURI     = "countersign://mandate"
	checkpointURI  = "countersign://record/checkpoint"
	disclosureURI  = "countersign://disclosure"
	intentsURI     = "countersign://intents"
	intentTemplate = "countersign://intents/{id}"
	maxChanges     = 100
)

// WaitInput is the input of wait_for_decision.
type WaitInput struct {
	IntentID       string `json:"intentId"`
	TimeoutSeconds int    `json:"timeoutSeconds,omitempty"`
}

var waitSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"intentId":       map[string]any{"type": "string", "maxLength": 64, "description": "The held intent (int_...), from the approval_pending answer."},
		"timeoutSeconds": map[string]any{"type": "integer", "minimum": 1, "maximum": 600, "description": "How long to wait, 1 to 600 s; default 120."},
	},
	"required": []any{"intentId"},
}

func (s *Server) addWaitTool() {
	s.mcp.AddTool(&mcp.Tool{
		Name:  waitToolName,
		Title: "Wait for a person's decision on a held payment",
		Description: "Waits until the payment or purchase held for a person's approval (outcome approval_pending) is decided, " +
			"or until timeoutSeconds pass, and returns the intent: status settled (approved, with its receipt), declined or expired " +
			"(nothing moved), or still pending_approval (decided is false: call again or tell the user). It reads the intent; it never approves.",
		InputSchema: waitSchema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in WaitInput
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil || in.IntentID == "" {
			return localProblem("mcp.invalid_arguments", "fix-request", "wait_for_decision needs intentId"), nil
		}
		if in.TimeoutSeconds <= 0 || in.TimeoutSeconds > 600 {
			in.TimeoutSeconds = 120
		}
		return s.wait(ctx, in), nil
	})
}

func (s *Server) wait(ctx context.Context, in WaitInput) *mcp.CallToolResult {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(in.TimeoutSeconds)*time.Second)
	defer cancel()
	tick := time.NewTicker(s.cfg.PollInterval)
	defer tick.Stop()
	status := string(pay.StatusPendingApproval)
	for {
		resp, err := s.cfg.Agent.Do(ctx, agentclient.Request{Method: http.MethodGet, Path: "/intents/" + url.PathEscape(in.IntentID)})
		if err != nil && ctx.Err() == nil {
			return localProblem("mcp.unreachable", "retry-as-is", err.Error())
		}
		if err == nil {
			if p, ok := resp.Problem(); ok {
				return problemResult(p)
			}
			var intent map[string]any
			if err := json.Unmarshal(resp.Body, &intent); err != nil {
				return localProblem("mcp.unexpected_answer", "stop", "the intent is not JSON")
			}
			status, _ = intent["status"].(string)
			// Approved payments pass through settling: not a decision's
			// end yet.
			if status != string(pay.StatusPendingApproval) && status != string(pay.StatusSettling) {
				out := map[string]any{"decided": true, "status": status, "intent": intent}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: decisionText(status) + "\n" + compact(out)}}, StructuredContent: out}
			}
		}
		select {
		case <-ctx.Done():
			out := map[string]any{"decided": false, "status": status, "intentId": in.IntentID}
			text := "Still waiting for a person's decision. Call " + waitToolName + " again, or tell the user it waits for approval."
			if status == string(pay.StatusSettling) {
				text = "Approved; the payment is still settling. Call " + waitToolName + " again for its outcome."
			}
			if s.cfg.ConsoleURL != "" {
				out["approveAt"] = s.cfg.ConsoleURL
				text += " The operator approves it at " + s.cfg.ConsoleURL + "."
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text + "\n" + compact(out)}}, StructuredContent: out}
		case <-tick.C:
		}
	}
}

func decisionText(status string) string {
	switch pay.Status(status) {
	case pay.StatusSettled:
		return "Approved: the payment settled."
	case pay.StatusAuthorized:
		return "Approved: the hold is authorized."
	case pay.StatusDeclined:
		return "Declined by a person: nothing moved. Do not retry; tell the user."
	case pay.StatusExpired:
		return "Expired: nobody decided in time and nothing moved."
	case pay.StatusFailed:
		return "Approved, but the rail refused it: nothing moved."
	}
	return "Decided: status " + status + "."
}

func (s *Server) addResources() {
	s.mcp.AddResource(&mcp.Resource{URI: mandateURI, Name: "mandate", Title: "The payment mandate in force",
		Description: "The agent's payment mandate: its claims (payees, rails, currency, per-payment and per-period caps, approval threshold, expiry) " +
			"and, once the deployment has honoured it, its live status and the budget left this period.", MIMEType: "application/json"},
		s.readMandate)
	s.mcp.AddResource(&mcp.Resource{URI: checkpointURI, Name: "checkpoint", Title: "The record's latest signed checkpoint",
		Description: "The signed Merkle tree head of the record (origin, size, root hash, signature), which every receipt and proof verifies against.",
		MIMEType:    "application/json"},
		s.readGet("/audit/checkpoint"))
	s.mcp.AddResource(&mcp.Resource{URI: disclosureURI, Name: "disclosure", Title: "This deployment's signed disclosure (ADP)",
		Description: "What is true of the deployment the agent pays through: the gate's policy in force, its operations, live mandates, operator and history.",
		MIMEType:    "application/json"},
		s.readDisclosure)
	s.mcp.AddResource(&mcp.Resource{URI: intentsURI, Name: "intents", Title: "Changes of this agent's intents",
		Description: "The latest changes of the agent's own payments and purchases (held, approved, settled, declined, refunded...) seen in the record. " +
			"Subscribe to be notified of each change (notifications/resources/updated), then read it or countersign://intents/{id}.",
		MIMEType: "application/json"},
		s.readChanges)
	s.mcp.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: intentTemplate, Name: "intent", Title: "One of this agent's intents",
		Description: "A payment or purchase of this agent, as GET /intents/{id} answers it.", MIMEType: "application/json"},
		s.readIntent)
}

func (s *Server) readGet(path string) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		resp, err := s.cfg.Agent.Do(ctx, agentclient.Request{Method: http.MethodGet, Path: path, Accept: "application/json"})
		return resourceAnswer(req.Params.URI, resp, err)
	}
}

func (s *Server) readDisclosure(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	resp, err := s.cfg.Agent.Do(ctx, agentclient.Request{Method: http.MethodPost, Path: "/disclose"})
	return resourceAnswer(req.Params.URI, resp, err)
}

func (s *Server) readIntent(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	id, ok := strings.CutPrefix(req.Params.URI, intentsURI+"/")
	if !ok || id == "" || strings.Contains(id, "/") {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	resp, err := s.cfg.Agent.Do(ctx, agentclient.Request{Method: http.MethodGet, Path: "/intents/" + url.PathEscape(id)})
	if err == nil && resp.Status == http.StatusNotFound {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	return resourceAnswer(req.Params.URI, resp, err)
}

func resourceAnswer(uri string, resp *agentclient.Response, err error) (*mcp.ReadResourceResult, error) {
	if err != nil {
		return nil, fmt.Errorf("countersign: %w", err)
	}
	if p, ok := resp.Problem(); ok {
		return nil, fmt.Errorf("countersign refused (%s, action %s): %s", p.Code, p.Action, p.Detail)
	}
	if resp.Status/100 != 2 {
		return nil, fmt.Errorf("countersign answered HTTP %d", resp.Status)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(resp.Body)}}}, nil
}

// readMandate answers the mandate's claims (read from the token; the
// server verifies it on every use) and, when the deployment has honoured
// it, mandate.get's live view with the period's remaining budget.
func (s *Server) readMandate(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	tok := s.cfg.Agent.Mandate
	if tok == "" {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	claims, err := jwsClaims(tok)
	if err != nil {
		return nil, fmt.Errorf("the configured mandate: %w", err)
	}
	out := map[string]any{"claims": claims}
	if id, _ := claims["jti"].(string); id != "" {
		body, _ := json.Marshal(map[string]string{"mandateId": id})
		resp, err := s.cfg.Agent.Do(ctx, agentclient.Request{Method: http.MethodPost, Path: "/protocol/mandate/get", Body: body})
		switch {
		case err != nil:
			return nil, fmt.Errorf("countersign: %w", err)
		case resp.Status == http.StatusOK:
			var live any
			_ = json.Unmarshal(resp.Body, &live)
			out["live"] = live
		default:
			out["live"] = nil
			out["note"] = "The deployment has not honoured this mandate yet (no payment under it): its whole budget is left."
		}
	}
	b, _ := json.Marshal(out)
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}}, nil
}

func jwsClaims(tok string) (map[string]any, error) {
	parts := strings.Split(strings.TrimSpace(tok), ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("not a compact JWS")
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, err
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	return c, nil
}

// Change is one change of one of the agent's intents, as the record
// tells it.
type Change struct {
	Seq      uint64 `json:"seq"`
	At       string `json:"at"`
	Type     string `json:"type"`
	IntentID string `json:"intentId"`
}

func (s *Server) readChanges(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	changes, tailing := s.tail.snapshot()
	b, _ := json.Marshal(map[string]any{"changes": changes, "following": tailing,
		"note": "Changes seen since a client subscribed to " + intentsURI + " (newest last, at most 100)."})
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}}, nil
}

func (s *Server) subscribe(uri string) error {
	if uri == intentsURI || strings.HasPrefix(uri, intentsURI+"/") {
		s.tail.start()
	}
	return nil
}

// tailer follows the record's live stream (/audit/stream) while some
// client is subscribed, keeps the changes of the agent's own intents and
// notifies subscribers of each.
type tailer struct {
	s *Server

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	changes []Change
	mine    map[string]bool // intent id → whether it is this agent's
}

func (t *tailer) start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel, t.done = cancel, make(chan struct{})
	t.mine = map[string]bool{}
	go t.run(ctx)
}

func (t *tailer) stop() {
	t.mu.Lock()
	cancel, done := t.cancel, t.done
	t.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (t *tailer) snapshot() ([]Change, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Change{}, t.changes...), t.cancel != nil
}

// run follows the stream from the record's head at start, reconnecting
// with Last-Event-ID after a break.
func (t *tailer) run(ctx context.Context) {
	defer close(t.done)
	var last uint64
	if resp, err := t.s.cfg.Agent.Do(ctx, agentclient.Request{Method: http.MethodGet, Path: "/audit/checkpoint", Accept: "application/json"}); err == nil && resp.Status == http.StatusOK {
		var cp struct {
			TreeSize uint64 `json:"treeSize"`
		}
		if json.Unmarshal(resp.Body, &cp) == nil {
			last = cp.TreeSize // seqs start at 1: the head's seq is the size
		}
	}
	backoff := time.Second
	for ctx.Err() == nil {
		seen, err := t.follow(ctx, last)
		if seen > last {
			last, backoff = seen, time.Second
		}
		if ctx.Err() != nil {
			return
		}
		t.s.log.Debug("mcpserver: record stream ended; reconnecting", "error", err, "after", last)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func (t *tailer) follow(ctx context.Context, after uint64) (uint64, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatUint(after, 10))
	}
	resp, err := t.s.cfg.Agent.Open(ctx, agentclient.Request{Method: http.MethodGet, Path: "/audit/stream", Query: q, Accept: "text/event-stream"})
	if err != nil {
		return after, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return after, fmt.Errorf("audit stream: HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var data strings.Builder
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "data:"):
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		case line == "":
			if data.Len() > 0 {
				var c Change
				if json.Unmarshal([]byte(data.String()), &c) == nil {
					after = max(after, c.Seq)
					if c.IntentID != "" {
						t.observe(ctx, c)
					}
				}
				data.Reset()
			}
		}
	}
	return after, sc.Err()
}

// observe keeps c when its intent is this agent's (the intent is readable
// with the agent's credential: intents.get answers an agent its own
// intents only) and notifies the subscribers.
func (t *tailer) observe(ctx context.Context, c Change) {
	t.mu.Lock()
	mine, known := t.mine[c.IntentID]
	t.mu.Unlock()
	if !known {
		resp, err := t.s.cfg.Agent.Do(ctx, agentclient.Request{Method: http.MethodGet, Path: "/intents/" + url.PathEscape(c.IntentID)})
		if err != nil {
			return
		}
		mine = resp.Status == http.StatusOK
		t.mu.Lock()
		t.mine[c.IntentID] = mine
		t.mu.Unlock()
	}
	if !mine {
		return
	}
	t.mu.Lock()
	t.changes = append(t.changes, c)
	if len(t.changes) > maxChanges {
		t.changes = t.changes[len(t.changes)-maxChanges:]
	}
	t.mu.Unlock()
	for _, uri := range []string{intentsURI, intentsURI + "/" + c.IntentID} {
		_ = t.s.mcp.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
	}
}
