package records

import (
	"math"

	"github.com/miekg/dns"
)

// A reply carries at most what its transport does (the client's UDP buffer, or 64 KB over TCP),
// and CoreDNS's server cuts whatever does not fit. Records past that are never made: an SRV
// question at a headless service of thousands of endpoints and a hundred ports would otherwise
// build half a million records for a reply that keeps a few thousand.

// minRecordLen is the fewest bytes a record of an answer takes on the wire: a compressed owner
// (2), type, class, TTL and data length (10), and the shortest data, a compressed name (2).
const minRecordLen = 14

// RoomFor is how many records a reply of size bytes can hold at most, whatever they are: when a
// reply is cut there, the records left out would not have fitted.
func RoomFor(size int) int {
	return max(size-dnsHeaderLen, 0) / minRecordLen
}

// dnsHeaderLen is the fixed header of a DNS message.
const dnsHeaderLen = 12

// Unlimited is the room of a zone transfer and of other callers that want every record.
const Unlimited = math.MaxInt

// room counts down the records a reply still has room for, the answer's first.
type room struct {
	left  int
	extra bool // the answer is made: what is taken now is additional data
	cut   bool // an answer record was left out: the reply is truncated
}

// everything is the room of a caller that wants every record.
func everything() *room { return &room{left: Unlimited} }

// take reports whether one more record fits, and remembers when an answer record did not:
// additional data left out leaves a reply untruncated (RFC 2181, section 9).
func (r *room) take() bool {
	if r.left <= 0 {
		r.cut = r.cut || !r.extra
		return false
	}
	r.left--
	return true
}

// additional marks the answer made: the records taken from now on are additional data.
func (r *room) additional() { r.extra = true }

// Reply is what one query gets at a name of a service: the records, the additional section's,
// whether the name exists, and whether records were left out for want of room.
type Reply struct {
	Answer, Extra []dns.RR
	// CNAME is an ExternalName's target, whose CNAME record is in Answer.
	CNAME     string
	Exists    bool
	Truncated bool
}
