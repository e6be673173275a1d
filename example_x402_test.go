package countersign_test

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/gate"
	"github.com/countersign/countersign/netguard"
	"github.com/countersign/countersign/operator"
	"github.com/countersign/countersign/pay"
	"github.com/countersign/countersign/store/memstore"
	"github.com/countersign/countersign/x402"
	"github.com/countersign/countersign/x402/evm"
	"github.com/countersign/countersign/x402/fakex402"
	"github.com/countersign/countersign/x402/fetch"
)

// A Go agent runtime pays an x402 resource with its own http.Client,
// through the node's gate and record: here a fake resource on loopback.
func ExampleNode_X402Transport() {
	ctx := context.Background()
	resource := httptest.NewServer(fakex402.New(&fakex402.Options{
		Resources: []fakex402.Resource{{Path: "/forecast", Body: []byte("sunny")}}}).Handler())
	defer resource.Close()

	st := memstore.New(nil)
	defer st.Close()
	_, recordKey, _ := ed25519.GenerateKey(nil)
	operatorPub, operatorKey, _ := ed25519.GenerateKey(nil)
	wallet, _ := evm.GenerateKey()
	usdc, _ := evm.ParseAddress(fakex402.DefaultAsset)
	loopback := netguard.Policy{AllowLoopback: true, AllowHTTP: true} // the fake resource only
	node, err := countersign.Open(ctx, st, &countersign.Options{
		RecordKey:    recordKey,
		OperatorKeys: []operator.PublicKey{{KeyID: "op-alice", Public: operatorPub}},
		URLs:         &loopback,
		X402: countersign.X402Options{Wallet: wallet, Assets: []x402.Asset{{Network: fakex402.DefaultNetwork,
			Address: usdc, Name: "USDC", Version: "2", Decimals: 6, Currency: "USD", MinorDigits: 2}}},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	defer node.Close(ctx)

	agentPub, agentKey, _ := ed25519.GenerateKey(nil)
	agent := hex.EncodeToString(agentPub)
	mandate, _ := pay.SignMandate(pay.MandateClaims{ID: "mdt-weather", Agent: agent,
		IssuedAt: time.Now().Add(-time.Minute), ExpiresAt: time.Now().Add(time.Hour),
		Payees: []string{"eip155:84532:" + fakex402.DefaultPayTo.String()}, Currency: "USD",
		PerTxCapMinor: 100, PerPeriodCapMinor: 1000, Period: gate.Day, Rails: []string{fetch.RailName},
		ConfirmAboveMinor: 50, IrreversibleConfirmAboveMinor: 50}, operatorKey, "op-alice")

	client := &http.Client{Transport: node.X402Transport(fetch.Agent{
		Caller: pay.Caller{KeyID: "ak_weather", Agents: []string{agent}}, Key: agentKey, Mandate: mandate,
		MaxAmount: pay.Amount{Minor: 2, Currency: "USD"}, Purpose: "today's forecast"})}
	resp, err := client.Get(resource.URL + "/forecast")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 sunny
}
