package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/encoding/protowire"
)

// A list read as it streams in: the audit's metadata-only lists and the informers' lists of slim
// objects. One item's bytes are held at a time, so reading a list of any length takes its longest
// item and a read buffer beside what is kept of it.

// maxListItem bounds one item of a list (the API server's own limit on a request is 3 MiB).
const maxListItem = 16 << 20

// readList reads a list of kind (in protobuf) from r: listMeta is handed the list's ListMeta
// (nil: skipped), and item each item's bytes, in the list's order, in a buffer reused for the
// next. What is not a whole list of that kind is an error, never a shorter list.
func readList(r io.Reader, kind string, listMeta, item func([]byte) error) error {
	s := &protoStream{r: bufio.NewReaderSize(r, 64<<10)}
	magic := make([]byte, len(protobufMagic))
	if _, err := io.ReadFull(s.r, magic); err != nil || string(magic) != string(protobufMagic) {
		return fmt.Errorf("%w: no protobuf envelope", errBadProtobuf)
	}
	s.off = int64(len(magic))
	got, read := "", false
	for {
		num, n, err := s.bytesField()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch num {
		case unknownTypeMeta: // the API server writes the type ahead of the object
			b, err := s.next(n, nil)
			if err != nil {
				return err
			}
			err = eachField(b, func(num protowire.Number, v []byte, _ uint64) error {
				if num == typeMetaKind {
					got = string(v)
				}
				return nil
			})
			if err != nil {
				return err
			}
		case unknownRaw:
			if got != kind {
				return fmt.Errorf("%w: a %q where a %s was asked for", errBadProtobuf, got, kind)
			}
			if err := s.items(n, listMeta, item); err != nil {
				return err
			}
			read = true
		default:
			if err := s.skip(n); err != nil {
				return err
			}
		}
	}
	if !read {
		return fmt.Errorf("%w: no %s", errBadProtobuf, kind)
	}
	return nil
}

// protoStream reads protobuf fields from a stream, counting the bytes read.
type protoStream struct {
	r   *bufio.Reader
	off int64
}

// ReadByte implements io.ByteReader for binary.ReadUvarint.
func (s *protoStream) ReadByte() (byte, error) {
	b, err := s.r.ReadByte()
	if err == nil {
		s.off++
	}
	return b, err
}

// uvarint reads a varint; a stream that ends inside one is malformed.
func (s *protoStream) uvarint() (uint64, error) {
	start := s.off
	v, err := binary.ReadUvarint(s)
	if err != nil && (s.off > start || !errors.Is(err, io.EOF)) {
		return 0, fmt.Errorf("%w: %v", errBadProtobuf, err)
	}
	return v, err
}

// tag reads a field's tag; io.EOF at the end of the stream.
func (s *protoStream) tag() (protowire.Number, protowire.Type, error) {
	v, err := s.uvarint()
	if err != nil {
		return 0, 0, err
	}
	num, typ := protowire.DecodeTag(v)
	if num < protowire.MinValidNumber {
		return 0, 0, fmt.Errorf("%w: field number %d", errBadProtobuf, num)
	}
	return num, typ, nil
}

// next reads n bytes into buf (grown as needed).
func (s *protoStream) next(n uint64, buf []byte) ([]byte, error) {
	if n > maxListItem {
		return nil, fmt.Errorf("%w: a field of %d bytes", errBadProtobuf, n)
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(s.r, buf); err != nil {
		return nil, fmt.Errorf("%w: %v", errBadProtobuf, err)
	}
	s.off += int64(n)
	return buf, nil
}

func (s *protoStream) skip(n uint64) error {
	for n > 0 {
		d, err := s.r.Discard(int(min(n, 1<<20)))
		s.off += int64(d)
		n -= uint64(d)
		if err != nil {
			return fmt.Errorf("%w: %v", errBadProtobuf, err)
		}
	}
	return nil
}

// skipValue skips the value of a field that is not length-delimited.
func (s *protoStream) skipValue(typ protowire.Type) error {
	switch typ {
	case protowire.VarintType:
		_, err := s.uvarint()
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: %v", errBadProtobuf, io.ErrUnexpectedEOF)
		}
		return err
	case protowire.Fixed32Type:
		return s.skip(4)
	case protowire.Fixed64Type:
		return s.skip(8)
	}
	return fmt.Errorf("%w: wire type %d", errBadProtobuf, typ)
}

// bytesField reads up to the next length-delimited field, skipping the others, and returns its
// number and length: its bytes are the stream's next n. The error is io.EOF only where the stream
// ends between two fields.
func (s *protoStream) bytesField() (num protowire.Number, n uint64, err error) {
	for {
		var typ protowire.Type
		if num, typ, err = s.tag(); err != nil {
			return 0, 0, err
		}
		if typ == protowire.BytesType {
			if n, err = s.uvarint(); errors.Is(err, io.EOF) {
				err = fmt.Errorf("%w: %v", errBadProtobuf, io.ErrUnexpectedEOF) // a tag without its field
			}
			return num, n, err
		}
		if err := s.skipValue(typ); err != nil {
			return 0, 0, err
		}
	}
}

// items reads a list of size bytes: its ListMeta to listMeta (nil: skipped), then each item, read
// whole, one at a time, to item.
func (s *protoStream) items(size uint64, listMeta, item func([]byte) error) error {
	end := s.off + int64(size)
	var buf []byte
	for s.off < end {
		num, n, err := s.bytesField()
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: %v", errBadProtobuf, io.ErrUnexpectedEOF)
		}
		if err != nil {
			return err
		}
		var to func([]byte) error
		switch num {
		case listItems:
			to = item
		case listMetadata:
			to = listMeta
		}
		if to == nil {
			if err := s.skip(n); err != nil {
				return err
			}
			continue
		}
		if buf, err = s.next(n, buf); err != nil {
			return err
		}
		if err := to(buf); err != nil {
			return err
		}
	}
	if s.off != end {
		return fmt.Errorf("%w: the list overruns its envelope", errBadProtobuf)
	}
	return nil
}
