package webhook

import (
	"github.com/countersign/countersign/netguard"
)

// ErrForbiddenAddress is the error of a delivery attempt whose destination
// resolves to an address the dispatcher refuses to connect to: private,
// loopback (unless allowed), link-local, multicast, unspecified, shared
// (CGNAT) or reserved. The attempt counts as failed and is retried on the
// schedule, since DNS may be corrected. It is netguard.ErrForbiddenAddress:
// the dispatcher connects through the shared guard (package netguard).
// Check with errors.Is.
var ErrForbiddenAddress = netguard.ErrForbiddenAddress

// Resolver resolves host names for the dispatcher's SSRF check.
// *net.Resolver implements it; tests pass a fake. LookupNetIP is called
// with network "ip" and must return every address of host.
type Resolver = netguard.Resolver
