// Package records makes kubetree's DNS records from the object model. Its sets are built when the
// cluster changes (a Builder turns a Service into a ServiceSet; the apex, dns-version and ns.dns
// names are FixedSets) and are never changed once published; the records of a reply are made from
// them per query (answer.go, srv.go, zonal.go, external.go), for zone transfers too (transfer.go).
// The reverse and external-IP indexes that PTR answers need live here as well. It knows DNS and
// the model, not client-go.
package records
