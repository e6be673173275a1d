package fakex402

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
)

// ChainClient reads a fake's chain state over HTTP (GET
// /chain/authorization-state): the x402.ChainReader for a fake served in
// another process, such as `countersign fake-x402`.
type ChainClient struct {
	BaseURL string       // the fake's base URL, e.g. "http://127.0.0.1:8402"
	HTTP    *http.Client // default http.DefaultClient
}

var _ x402.ChainReader = (*ChainClient)(nil)

// AuthorizationState asks the fake whether the authorization is used.
func (c *ChainClient) AuthorizationState(ctx context.Context, network string, asset, authorizer evm.Address, nonce [32]byte) (bool, error) {
	q := url.Values{"network": {network}, "asset": {asset.String()}, "authorizer": {authorizer.String()},
		"nonce": {"0x" + hex.EncodeToString(nonce[:])}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.BaseURL, "/")+"/chain/authorization-state?"+q.Encode(), nil)
	if err != nil {
		return false, err
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return false, err
	}
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("fakex402: authorization-state: %s: %.200s", resp.Status, b)
	}
	var out struct {
		Used *bool `json:"used"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Used == nil {
		return false, fmt.Errorf("fakex402: authorization-state: unreadable answer %.200q", b)
	}
	return *out.Used, nil
}
