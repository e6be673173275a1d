// Package verifyvectors holds the test vectors of docs/VERIFYING.md, the
// document that tells an outsider exactly which bytes every Countersign
// artifact signs or hashes, and the test that ties the document to the
// code. It has no code outside its tests.
//
// testdata/*.json are the vectors. TestVectors makes every artifact with
// the project's own code from fixed keys and inputs, requires the
// deterministic vectors to be reproduced byte for byte, and verifies every
// vector twice: with the project's verifiers, and with recipe_test.go, a
// verifier written from the document alone that imports only the standard
// library. After an intended change of a format, update docs/VERIFYING.md
// and run
//
//	go test ./internal/verifyvectors -update
//
// then review the diff of testdata.
package verifyvectors
