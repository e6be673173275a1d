package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/gowebpki/jcs"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign/agentclient"
	"github.com/countersign/countersign/commerce"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/x402/fetch"
)

// IdempotencyKey derives the idempotency key of a call the agent made
// without one: the same tool with the same arguments in the same MCP
// session gets the same key, so a retry (after a timeout, a lost answer, a
// model that calls twice) replays the first answer and never pays twice,
// while any other call gets another key. args is the call's arguments
// without an idempotency key; session is the MCP session id (or, for a
// transport without session ids, such as stdio, a random id of the server
// process). The key is "mcp-" and 40 hex digits of SHA-256 over the
// session, the tool and the RFC 8785 form of args.
//
// An agent that means to make the same request again (the same payee, the
// same amount, on purpose) passes an idempotencyKey of its own, or makes it
// in another session.
func IdempotencyKey(session, tool string, args json.RawMessage) (string, error) {
	canon, err := jcs.Transform(args)
	if err != nil {
		return "", fmt.Errorf("mcpserver: arguments: %w", err)
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte("countersign-mcp-idempotency-v1"), []byte(session), []byte(tool), canon} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return "mcp-" + hex.EncodeToString(h.Sum(nil))[:40], nil
}

// sessionScope is what derived keys are scoped to: the MCP session id, or
// this server process when the transport has none.
func (s *Server) sessionScope(ss *mcp.ServerSession) string {
	if ss != nil && ss.ID() != "" {
		return "session:" + ss.ID()
	}
	return "instance:" + s.instance
}

// call runs one tool call: arguments → request (filled, signed) → answer →
// result.
func (s *Server) call(ctx context.Context, t *ToolSpec, req *mcp.CallToolRequest) *mcp.CallToolResult {
	args := map[string]any{}
	if raw := req.Params.Arguments; len(raw) > 0 && string(raw) != "null" {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&args); err != nil {
			return localProblem("mcp.invalid_arguments", "fix-request", "the arguments are not a JSON object: "+err.Error())
		}
	}
	hr, pr := s.build(t, req.Session, args)
	if pr != nil {
		return pr
	}
	resp, err := s.cfg.Agent.Do(ctx, hr)
	if err != nil {
		return localProblem("mcp.unreachable", "retry-as-is", "the Countersign server could not be reached: "+err.Error())
	}
	return s.result(t, resp)
}

// build turns a tool's arguments into the HTTP request: parameters into
// the path and query, the mandate and idempotency key filled, what must be
// signed signed.
func (s *Server) build(t *ToolSpec, ss *mcp.ServerSession, args map[string]any) (agentclient.Request, *mcp.CallToolResult) {
	op := t.Operation
	r := agentclient.Request{Method: op.Method, Path: op.Path}
	query := url.Values{}
	for _, p := range t.params {
		v, ok := args[p.name]
		if !ok {
			continue
		}
		delete(args, p.name)
		switch p.in {
		case "path":
			r.Path = strings.Replace(r.Path, "{"+p.name+"}", url.PathEscape(scalar(v)), 1)
		case "query":
			if list, ok := v.([]any); ok {
				for _, e := range list {
					query.Add(p.name, scalar(e))
				}
			} else {
				query.Set(p.name, scalar(v))
			}
		}
	}
	if strings.Contains(r.Path, "{") {
		return r, localProblem("mcp.invalid_arguments", "fix-request", "a path parameter is missing: "+r.Path)
	}
	r.Query = query
	if !t.hasBody {
		return r, nil
	}

	switch t.mandate {
	case mandatePayment:
		if _, ok := args["mandate"]; !ok && s.cfg.Agent.Mandate != "" {
			args["mandate"] = s.cfg.Agent.Mandate
		}
	case mandateMemory:
		if _, ok := args["mandate"]; !ok && s.cfg.Agent.MemoryMandate != "" {
			args["mandate"] = s.cfg.Agent.MemoryMandate
		}
	}
	if _, ok := args["source"]; !ok && t.selfSource {
		args["source"] = map[string]any{"kind": "agent", "ref": s.cfg.Agent.ID()}
	}
	if t.idempotent {
		holder := args
		if t.idemInSpend {
			holder, _ = args["spend"].(map[string]any)
		}
		if holder != nil {
			key, _ := holder["idempotencyKey"].(string)
			if key == "" {
				delete(holder, "idempotencyKey")
				canon, _ := json.Marshal(args)
				k, err := IdempotencyKey(s.sessionScope(ss), t.Name, canon)
				if err != nil {
					return r, localProblem("mcp.invalid_arguments", "fix-request", err.Error())
				}
				holder["idempotencyKey"], key = k, k
			}
			if t.idemHeader {
				r.IdempotencyKey = key
			}
		}
	}

	// The tool signs: an envelope from the agent is a mistake to fix, never
	// something to sign over or to drop silently.
	envelopeGiven := false
	switch t.signing {
	case signPayment, signPurchase, signFetch:
		_, envelopeGiven = args["envelope"]
	case signSpend:
		spend, _ := args["spend"].(map[string]any)
		_, envelopeGiven = spend["envelope"]
	}
	if envelopeGiven {
		return r, localProblem("request.unknown_field", "fix-request",
			"leave envelope out: this tool signs the request with the agent's key under its mandate")
	}
	purpose := "by an agent over MCP (" + t.Name + ")"
	var body any = args
	switch t.signing {
	case signPayment:
		var in pay.Instruction
		if err := strict(args, &in); err != nil {
			return r, err
		}
		if err := s.cfg.Agent.SignPayment(&in, "payment "+purpose); err != nil {
			return r, localProblem("mcp.signing_failed", "stop", err.Error())
		}
		body = &in
	case signPurchase:
		var p commerce.PurchaseRequest
		if err := strict(args, &p); err != nil {
			return r, err
		}
		if err := s.cfg.Agent.SignPurchase(&p, "purchase "+purpose); err != nil {
			return r, localProblem("mcp.signing_failed", "stop", err.Error())
		}
		body = &p
	case signFetch:
		var fr fetch.Request
		if err := strict(args, &fr); err != nil {
			return r, err
		}
		if err := s.cfg.Agent.SignFetch(&fr, "x402 fetch "+purpose); err != nil {
			return r, localProblem("mcp.signing_failed", "stop", err.Error())
		}
		body = &fr
	case signSpend:
		if spend, ok := args["spend"].(map[string]any); ok {
			var in pay.Instruction
			if err := strict(spend, &in); err != nil {
				return r, err
			}
			if in.Purpose == "" {
				in.Purpose = op.ID + " " + purpose
			}
			if err := s.cfg.Agent.SignSpend(op.ID, &in); err != nil {
				return r, localProblem("mcp.signing_failed", "stop", err.Error())
			}
			args["spend"] = &in
		}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return r, localProblem("mcp.invalid_arguments", "fix-request", err.Error())
	}
	r.Body = b
	return r, nil
}

// strict decodes v (decoded arguments) into dst, refusing members dst does
// not have: what the agent sent is signed, so nothing may be dropped on
// the way.
func strict(v any, dst any) *mcp.CallToolResult {
	b, _ := json.Marshal(v)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return localProblem("request.validation", "fix-request", "the arguments do not fit the tool's schema: "+err.Error())
	}
	return nil
}

func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// result turns an answer into what the model reads.
func (s *Server) result(t *ToolSpec, resp *agentclient.Response) *mcp.CallToolResult {
	if p, ok := resp.Problem(); ok {
		return problemResult(p)
	}
	var body any
	if len(resp.Body) > 0 && json.Unmarshal(resp.Body, &body) != nil {
		body = string(resp.Body)
	}
	if resp.Status >= 300 {
		return &mcp.CallToolResult{IsError: true,
			Content:           []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("HTTP %d without a problem document: %s", resp.Status, resp.Body)}},
			StructuredContent: map[string]any{"status": resp.Status, "code": "mcp.unexpected_answer", "action": "stop", "body": body}}
	}
	structured, ok := body.(map[string]any)
	if !ok {
		structured = map[string]any{"data": body}
	}
	var summary string
	if held := pendingApproval(structured); resp.Status == http.StatusAccepted && held != nil {
		out := map[string]any{
			"outcome":           "approval_pending",
			"intentId":          held["intentId"],
			"expiresAt":         held["expiresAt"],
			"approvalsRequired": held["approvalsRequired"],
			"next":              "A person must approve this before anything moves. Tell the user; call " + waitToolName + " with this intentId to learn the decision.",
			"answer":            structured,
		}
		summary = fmt.Sprintf("Approval pending: intent %v waits for a person's approval until %v.", held["intentId"], held["expiresAt"])
		if s.cfg.ConsoleURL != "" {
			out["approveAt"] = s.cfg.ConsoleURL
			summary += " The operator approves it at " + s.cfg.ConsoleURL + "."
		}
		summary += " Call " + waitToolName + " with the intentId to wait for the decision."
		structured = out
	} else {
		summary = fmt.Sprintf("%s: HTTP %d %s.", t.Name, resp.Status, http.StatusText(resp.Status))
		if resp.Status == http.StatusAccepted {
			summary += " Accepted, not final: read the answer for what it waits for."
		}
		if settled(structured) {
			// A receipt, or an order carrying one: the money moved.
			structured["outcome"] = "settled"
			summary = t.Name + ": settled; the receipt is in the answer."
		}
	}
	if resp.Replayed() {
		structured["replayed"] = true
		summary += " This call had already been made: this is its first answer again, and nothing was done twice."
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: summary + "\n" + compact(structured)}}, StructuredContent: structured}
}

// settled reports whether an answer is, or carries, a receipt.
func settled(m map[string]any) bool {
	if m["settledAt"] != nil && m["intentId"] != nil {
		return true
	}
	r, _ := m["receipt"].(map[string]any)
	return r != nil && r["settledAt"] != nil
}

// pendingApproval finds, in an answer or one level down, an object held
// for a person: an intentId with status pending_approval.
func pendingApproval(m map[string]any) map[string]any {
	if m["status"] == string(pay.StatusPendingApproval) && m["intentId"] != nil {
		return m
	}
	for _, v := range m {
		if sub, ok := v.(map[string]any); ok && sub["status"] == string(pay.StatusPendingApproval) && sub["intentId"] != nil {
			return sub
		}
	}
	return nil
}

// Advice is what a problem's action asks of the model.
var advice = map[string]string{
	"retry-as-is":      "Call the tool again unchanged after retryAfter seconds; the same call reuses its idempotency key, so nothing happens twice.",
	"fix-request":      "Change the arguments (errors lists each field) and call again.",
	"reauthenticate":   "The agent's credential was refused: do not retry; tell the user the agent's credential needs attention.",
	"await-operator":   "A person must act first: tell the user; do not retry until they have.",
	"continue-at-link": "The buyer must continue at the merchant: give the user the continue link; do not retry until they have.",
	"stop":             "Do not retry: tell the user what was refused and why.",
}

func problemResult(p *agentclient.Problem) *mcp.CallToolResult {
	text := fmt.Sprintf("Refused: %s (HTTP %d, action %s): %s", p.Code, p.Status, p.Action, firstOf(p.Detail, p.Title))
	if a := advice[p.Action]; a != "" {
		text += "\n" + a
	}
	return &mcp.CallToolResult{IsError: true,
		Content:           []mcp.Content{&mcp.TextContent{Text: text + "\n" + compact(p.Members)}},
		StructuredContent: p.Members}
}

// localProblem is a refusal by this server, before anything is sent,
// shaped as the server's problems are.
func localProblem(code, action, detail string) *mcp.CallToolResult {
	return problemResult(&agentclient.Problem{Code: code, Action: action, Detail: detail, Status: 0,
		Members: map[string]any{"code": code, "action": action, "detail": detail}})
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
