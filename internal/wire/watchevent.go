package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// A protobuf watch stream is a run of frames, each a 4-byte big-endian length and a meta/v1
// WatchEvent: its type, and its object as the API server encodes any object (the envelope the
// codecs read). client-go's watch decoder copies each event's object out of the frame into a
// RawExtension of its own before decoding it, an allocation and a copy as large as the object, on
// the path every pod change and EndpointSlice update takes. WatchEvents decodes the object where
// it lies in the frame, and reads every frame into the same buffer.

// Field numbers, from k8s.io/apimachinery's generated.proto.
const (
	watchEventType   = 1 // meta/v1 WatchEvent
	watchEventObject = 2
	rawExtensionRaw  = 1 // runtime.RawExtension
)

// maxWatchFrame is the largest event read, the limit of apimachinery's streaming decoder that
// client-go's watches read with; the API server stores no object that large.
const maxWatchFrame = 16 << 20

// WatchEvents reads the events of a protobuf watch stream.
type WatchEvents struct {
	r     io.Reader
	dec   runtime.Decoder
	frame []byte
}

// NewWatchEvents reads the events of r and decodes their objects with dec, which must keep no
// part of the bytes it is given (the slim codecs and the generated protobuf types copy what they
// keep): they are the frame, which the next event overwrites.
func NewWatchEvents(r io.Reader, dec runtime.Decoder) *WatchEvents {
	return &WatchEvents{r: r, dec: dec}
}

// Next reads and decodes the next event. At the stream's end it returns io.EOF, or
// io.ErrUnexpectedEOF within a frame.
func (w *WatchEvents) Next() (watch.EventType, runtime.Object, error) {
	var header [4]byte
	if _, err := io.ReadFull(w.r, header[:]); err != nil {
		return "", nil, err
	}
	n := binary.BigEndian.Uint32(header[:])
	if n > maxWatchFrame {
		return "", nil, fmt.Errorf("watch event of %d bytes, more than %d", n, maxWatchFrame)
	}
	if cap(w.frame) < int(n) {
		w.frame = make([]byte, n)
	}
	w.frame = w.frame[:n]
	if _, err := io.ReadFull(w.r, w.frame); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return "", nil, err
	}
	return decodeWatchEvent(w.frame, w.dec)
}

var errNoWatchObject = errors.New("watch event without an object")

// decodeWatchEvent reads a WatchEvent's type and decodes its object, in place, with dec.
func decodeWatchEvent(frame []byte, dec runtime.Decoder) (watch.EventType, runtime.Object, error) {
	var typ watch.EventType
	var raw []byte
	err := eachField(frame, func(num protowire.Number, v []byte, _ uint64) error {
		switch num {
		case watchEventType:
			typ = eventType(v)
			if typ == "" {
				return fmt.Errorf("got invalid watch event type: %q", v)
			}
		case watchEventObject:
			return eachField(v, func(num protowire.Number, v []byte, _ uint64) error {
				if num == rawExtensionRaw {
					raw = v
				}
				return nil
			})
		}
		return nil
	})
	switch {
	case err != nil:
		return "", nil, err
	case typ == "":
		return "", nil, errors.New("watch event without a type")
	case raw == nil:
		return "", nil, errNoWatchObject
	}
	obj, err := runtime.Decode(dec, raw)
	if err != nil {
		return "", nil, fmt.Errorf("unable to decode watch event: %w", err)
	}
	return typ, obj, nil
}

// eventType is the watch event type named by b, a constant (nothing allocated); "" when b names
// none.
func eventType(b []byte) watch.EventType {
	for _, t := range [...]watch.EventType{watch.Modified, watch.Added, watch.Deleted, watch.Bookmark, watch.Error} {
		if string(b) == string(t) {
			return t
		}
	}
	return ""
}
