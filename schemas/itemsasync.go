package schemas

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"
)

// asyncItemsBytes is the smallest manifest whose streamed block items are
// made into resources on a second goroutine (asyncItems): reading a
// 20,000-file block and making its resources were 60 ms of one core
// while the other idled; under some hundreds of kilobytes the goroutine
// is not worth its start.
const asyncItemsBytes = 512 << 10

// itemsPerBatch is how many items asyncItems hands over at once.
const itemsPerBatch = 64

// asyncItems is an itemSink that hands the items the subset reader
// streams to the loader on a second goroutine, in order, a batch at a
// time: the reader reads the next items while the loader makes the
// resources of the last ones. The reader reuses an item's nodes once
// item returns, so each item is copied into the batch first (a few nodes;
// the batches' memory is reused). A loader that refuses an item (false)
// stops the reader at its next item, as a synchronous sink stops it at
// once: either way the fast path gives the manifest up. wait must be
// called once the reader is done, before the loader is read.
type asyncItems struct {
	to      itemSink
	cur     *itemBatch
	work    chan *itemBatch
	free    chan *itemBatch
	done    chan struct{}
	stopped atomic.Bool
	// panicked is what the loader panicked with (and where), set before
	// done is closed.
	panicked any
}

type asyncItem struct {
	seq     *ynode
	ccm     bool
	entry   int
	typ     string
	j, left int
	item    *ynode
}

// itemBatch holds items and the copies of their nodes, in chunks that
// never move (an item's nodes point to each other).
type itemBatch struct {
	items []asyncItem
	nodes [][]ynode
	ptrs  [][]*ynode
	n, p  int // chunks of nodes and ptrs in use
}

const (
	batchNodeChunk = 512
	batchPtrChunk  = 1024
)

func newAsyncItems(to itemSink) *asyncItems {
	a := &asyncItems{to: to, work: make(chan *itemBatch, 4), free: make(chan *itemBatch, 6), done: make(chan struct{})}
	go a.loop()
	return a
}

func (a *asyncItems) loop() {
	defer close(a.done)
	defer func() {
		// A loader that panics panics in the reader's goroutine (wait),
		// where the caller's recover sees it, as it did synchronously;
		// the reader is stopped, and what it already sent is drained.
		if r := recover(); r != nil {
			a.panicked = fmt.Sprintf("%v\n\n(the loader's goroutine:)\n%s", r, debug.Stack())
			a.stopped.Store(true)
			for range a.work {
			}
		}
	}()
	for b := range a.work {
		if !a.stopped.Load() {
			for _, it := range b.items {
				if !a.to.item(it.seq, it.ccm, it.entry, it.typ, it.j, it.left, it.item) {
					a.stopped.Store(true)
					break
				}
			}
		}
		b.reset()
		select {
		case a.free <- b:
		default:
		}
	}
}

// blockType implements itemSink. (The schema's type names are read
// only: safe beside the loader.)
func (a *asyncItems) blockType(key string) bool { return a.to.blockType(key) }

// item implements itemSink.
func (a *asyncItems) item(seq *ynode, ccm bool, entry int, typ string, j, left int, item *ynode) bool {
	if a.stopped.Load() {
		return false
	}
	b := a.cur
	if b == nil {
		select {
		case b = <-a.free:
		default:
			b = &itemBatch{items: make([]asyncItem, 0, itemsPerBatch)}
		}
		a.cur = b
	}
	b.items = append(b.items, asyncItem{seq: seq, ccm: ccm, entry: entry, typ: typ, j: j, left: left, item: b.clone(item)})
	if len(b.items) == itemsPerBatch {
		a.work <- b
		a.cur = nil
	}
	return true
}

// wait hands over the last items and waits until the loader has them
// all; it reports whether the loader took every item.
func (a *asyncItems) wait() bool {
	if a.cur != nil && len(a.cur.items) > 0 {
		a.work <- a.cur
	}
	a.cur = nil
	close(a.work)
	<-a.done
	if a.panicked != nil {
		panic(a.panicked)
	}
	return !a.stopped.Load()
}

// clone copies n and the nodes under it into the batch.
func (b *itemBatch) clone(n *ynode) *ynode {
	c := b.node()
	*c = *n
	if len(n.keys) > 0 {
		c.keys = b.ptrSlice(len(n.keys))
		for i, k := range n.keys {
			c.keys[i] = b.clone(k)
		}
	}
	if len(n.vals) > 0 {
		c.vals = b.ptrSlice(len(n.vals))
		for i, v := range n.vals {
			c.vals[i] = b.clone(v)
		}
	}
	return c
}

func (b *itemBatch) node() *ynode {
	for {
		if b.n == len(b.nodes) {
			b.nodes = append(b.nodes, make([]ynode, 0, batchNodeChunk))
		}
		c := &b.nodes[b.n]
		if len(*c) < cap(*c) {
			*c = append(*c, ynode{})
			return &(*c)[len(*c)-1]
		}
		b.n++
	}
}

func (b *itemBatch) ptrSlice(n int) []*ynode {
	for {
		if b.p == len(b.ptrs) {
			b.ptrs = append(b.ptrs, make([]*ynode, 0, max(batchPtrChunk, n)))
		}
		c := &b.ptrs[b.p]
		if cap(*c)-len(*c) >= n {
			*c = (*c)[:len(*c)+n]
			return (*c)[len(*c)-n : len(*c) : len(*c)]
		}
		b.p++
	}
}

// reset empties the batch for reuse: the loader is done with its nodes
// (the resources it made hold strings and values, never nodes).
func (b *itemBatch) reset() {
	clear(b.items)
	b.items = b.items[:0]
	for i := range b.nodes {
		clear(b.nodes[i])
		b.nodes[i] = b.nodes[i][:0]
	}
	for i := range b.ptrs {
		clear(b.ptrs[i])
		b.ptrs[i] = b.ptrs[i][:0]
	}
	b.n, b.p = 0, 0
}
