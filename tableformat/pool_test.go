package tableformat

import "testing"

// Reallocate that grows a buffer into a recycled one keeps the old bytes
// and clears the rest, though the recycled buffer held other bytes.
func TestPoolReallocateIntoDirtyBuffer(t *testing.T) {
	a := newPoolAllocator(defaultPoolBytes)
	for _, size := range []int{5000, 1 << 16, 1 << 20} {
		dirty := a.Allocate(3 * size)
		for i := range dirty {
			dirty[i] = 0xff
		}
		a.Free(dirty) // the class Reallocate below takes from
		b := a.Allocate(size)
		for i := range b {
			b[i] = byte(i%251 + 1)
		}
		hits := a.hits
		d := a.Reallocate(3*size, b)
		if a.hits != hits+1 {
			t.Fatalf("size %d: Reallocate did not take the recycled buffer", size)
		}
		if len(d) != 3*size {
			t.Fatalf("size %d: Reallocate: len %d", size, len(d))
		}
		for i, x := range d {
			want := byte(0)
			if i < size {
				want = byte(i%251 + 1)
			}
			if x != want {
				t.Fatalf("Reallocate(%d → %d): byte %d is %#x, want %#x", size, len(d), i, x, want)
			}
		}
		a.Free(d)
	}
}
