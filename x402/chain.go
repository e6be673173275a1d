package x402

import (
	"context"

	"github.com/countersign/countersign/x402/evm"
)

// ChainReader tells whether an EIP-3009 authorization has been used: the
// token contract's authorizationState(authorizer, nonce), read on network
// (CAIP-2, "eip155:<chain id>") at the contract asset. A real
// implementation is one eth_call to asset with
// [AuthorizationStateCalldata] on a node of that chain, answering the
// returned bool (32 bytes, last byte 0 or 1).
//
// Semantics the caller must respect:
//
//   - true: the nonce is spent: the transfer was executed, or the
//     authorizer cancelled it (cancelAuthorization, which needs the
//     authorizer's own signature; a payer that never signs cancellations
//     may read true as paid). It stays true.
//   - false before validBefore: nothing is settled yet, but a facilitator
//     holding the signed authorization may still submit it. Not an answer.
//   - false once the chain's time is past validBefore (and the block read
//     is final): the authorization can never be executed. Conclusive.
//   - an error: nothing is known; ask again later.
//
// An implementation must read a final (or sufficiently deep) block, or a
// reorganisation can undo a true.
type ChainReader interface {
	AuthorizationState(ctx context.Context, network string, asset, authorizer evm.Address, nonce [32]byte) (used bool, err error)
}

// authorizationStateSelector is the first four bytes of
// keccak256("authorizationState(address,bytes32)").
var authorizationStateSelector = func() [4]byte {
	h := evm.Keccak256([]byte("authorizationState(address,bytes32)"))
	return [4]byte(h[:4])
}()

// AuthorizationStateCalldata is the ABI-encoded call
// authorizationState(authorizer, nonce): the selector 0xe94a0102, the
// address left-padded to 32 bytes, and the nonce. 68 bytes.
func AuthorizationStateCalldata(authorizer evm.Address, nonce [32]byte) []byte {
	b := make([]byte, 0, 68)
	b = append(b, authorizationStateSelector[:]...)
	b = append(b, make([]byte, 12)...)
	b = append(b, authorizer[:]...)
	return append(b, nonce[:]...)
}

// NonceFromID derives an authorization's nonce from a payment's id:
// keccak256("countersign/x402/nonce\x00" ‖ id). Retrying a payment
// reuses its nonce, so the token contract settles it at most once;
// distinct ids give distinct nonces.
func NonceFromID(id string) [32]byte {
	return evm.Keccak256([]byte("countersign/x402/nonce\x00"), []byte(id))
}
