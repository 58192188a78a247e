package testkit

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// PackAny is m packed in a protobuf Any and serialized: the body of a
// Flight SQL command.
func PackAny(t testing.TB, m proto.Message) []byte {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
