package coordinator

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func pagedReportOf(n int) *Report {
	rep := &Report{RunID: "r", Status: "succeeded"}
	for i := range n {
		rep.Resources = append(rep.Resources, ResourceReport{Ref: fmt.Sprintf("file#/tmp/f%05d", i), Status: "stable"})
	}
	return rep
}

// runs.get pages a report's resources: whole when it fits and no page was
// asked for; the asked range otherwise; and never more than fits in one
// reply, with the offset to ask for next.
func TestPageReport(t *testing.T) {
	small := pagedReportOf(10)
	require.Same(t, small, pageReport(small, 0, 0, 1<<20), "a report that fits is returned as it is")
	require.Nil(t, small.Page)

	p := pageReport(small, 4, 3, 1<<20)
	require.Len(t, p.Resources, 3)
	require.Equal(t, "file#/tmp/f00004", p.Resources[0].Ref)
	require.Equal(t, ReportPage{Offset: 4, Count: 3, Total: 10, NextOffset: ptr(7)}, *p.Page)

	last := pageReport(small, 7, 100, 1<<20)
	require.Equal(t, ReportPage{Offset: 7, Count: 3, Total: 10}, *last.Page)
	past := pageReport(small, 50, 0, 1<<20)
	require.Empty(t, past.Resources)
	require.Equal(t, ReportPage{Offset: 10, Count: 0, Total: 10}, *past.Page)

	// 20,000 resources do not fit in 1 MiB: the pages that come back each
	// fit, and walking next_offset yields every resource once, in order.
	big := pagedReportOf(20000)
	const max = 1 << 20
	var seen []string
	offset, pages := 0, 0
	for {
		p := pageReport(big, offset, 0, max)
		b, err := json.Marshal(p.Resources)
		require.NoError(t, err)
		require.LessOrEqual(t, len(b), max)
		require.NotEmpty(t, p.Resources)
		for _, r := range p.Resources {
			seen = append(seen, r.Ref)
		}
		pages++
		if p.Page.NextOffset == nil {
			break
		}
		offset = *p.Page.NextOffset
	}
	require.Greater(t, pages, 1)
	require.Len(t, seen, 20000)
	for i, ref := range seen {
		require.Equal(t, fmt.Sprintf("file#/tmp/f%05d", i), ref)
	}
}

func ptr(i int) *int { return &i }
