package evm_test

import (
	"encoding/hex"
	"fmt"
	"math/big"

	"github.com/countersign/countersign/x402/evm"
)

// Sign an EIP-3009 authorization for USDC on Base Sepolia, as an x402
// "exact" payment carries it, and check it as the token contract would.
func ExampleTransferWithAuthorization_Digest() {
	key, _ := evm.ParseKey("0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80")
	usdc, _ := evm.ParseAddress("0x036CbD53842c5426634e7929541eC2318f3dCF7e")
	payTo, _ := evm.ParseAddress("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
	auth := evm.TransferWithAuthorization{
		From: key.Address(), To: payTo, Value: big.NewInt(1000),
		ValidAfter: big.NewInt(0), ValidBefore: big.NewInt(1900000000),
	}
	digest, err := auth.Digest(evm.Domain{Name: "USDC", Version: "2", ChainID: big.NewInt(84532), VerifyingContract: usdc})
	if err != nil {
		panic(err)
	}
	sig := key.Sign(digest)
	signer, _ := evm.Recover(digest, sig[:])
	fmt.Println(hex.EncodeToString(digest[:]))
	fmt.Println(signer == key.Address(), signer)
	// Output:
	// 20cb77586298c6c95dd1399d9755e068137d2279251fc70735293fee38c90016
	// true 0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266
}
