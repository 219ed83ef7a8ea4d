// Command chart draws results/keysize.csv (from cmd/keysize) as one picture:
// insert throughput and on-disk size by kind of primary key.
//
//	go run ./cmd/chart -in results/keysize.csv -out keysize.png
package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"image/color"
	"log"
	"os"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func main() {
	in := flag.String("in", "results/keysize.csv", "CSV written by cmd/keysize")
	out := flag.String("out", "keysize.png", "PNG to write")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		log.Fatal(err)
	}
}

// row is one line of the CSV.
type row struct {
	kind            string
	rows            float64
	perSecond       float64
	dataMB, indexMB float64
}

func read(path string) ([]row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(recs) < 2 {
		return nil, fmt.Errorf("%s: no results", path)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	for _, h := range []string{"kind", "rows", "rows_per_second", "data_bytes", "index_bytes"} {
		if _, ok := col[h]; !ok {
			return nil, fmt.Errorf("%s: no column %q", path, h)
		}
	}
	var rows []row
	for _, r := range recs[1:] {
		num := func(h string) (float64, error) { return strconv.ParseFloat(r[col[h]], 64) }
		var x row
		x.kind = r[col["kind"]]
		var errs [4]error
		x.rows, errs[0] = num("rows")
		x.perSecond, errs[1] = num("rows_per_second")
		x.dataMB, errs[2] = num("data_bytes")
		x.indexMB, errs[3] = num("index_bytes")
		for _, err := range errs {
			if err != nil {
				return nil, fmt.Errorf("%s: %v", path, err)
			}
		}
		x.dataMB /= 1e6
		x.indexMB /= 1e6
		rows = append(rows, x)
	}
	return rows, nil
}

func run(in, out string) error {
	rows, err := read(in)
	if err != nil {
		return err
	}
	names := make([]string, len(rows))
	speed := make(plotter.Values, len(rows))
	data := make(plotter.Values, len(rows))
	index := make(plotter.Values, len(rows))
	for i, r := range rows {
		names[i] = r.kind
		speed[i] = r.perSecond / 1000
		data[i] = r.dataMB
		index[i] = r.indexMB
	}
	w := vg.Points(20)

	left := plot.New()
	left.Title.Text = fmt.Sprintf("Insert throughput through ent, %s rows a table", count(rows[0].rows))
	left.Y.Label.Text = "thousand rows per second"
	bars, err := plotter.NewBarChart(speed, w)
	if err != nil {
		return err
	}
	bars.Color = color.RGBA{R: 66, G: 133, B: 244, A: 255}
	left.Add(bars)

	right := plot.New()
	right.Title.Text = "Size on disk (InnoDB, after ANALYZE TABLE)"
	right.Y.Label.Text = "MB"
	dataBars, err := plotter.NewBarChart(data, w)
	if err != nil {
		return err
	}
	dataBars.Color = color.RGBA{R: 52, G: 168, B: 83, A: 255}
	dataBars.Offset = -w / 2
	indexBars, err := plotter.NewBarChart(index, w)
	if err != nil {
		return err
	}
	indexBars.Color = color.RGBA{R: 251, G: 188, B: 5, A: 255}
	indexBars.Offset = w / 2
	right.Add(dataBars, indexBars)
	right.Legend.Add("table (clustered primary key)", dataBars)
	right.Legend.Add("secondary index", indexBars)
	right.Legend.Top = true
	right.Legend.Left = true // the first bars are short: room above them
	right.Legend.XOffs = vg.Points(10)
	for _, p := range []*plot.Plot{left, right} { // one kind of key per bar
		p.NominalX(names...)
		p.X.Tick.Label.Rotation = 0.6
		p.X.Tick.Label.XAlign = draw.XRight
	}

	img := vgimg.New(vg.Points(1100), vg.Points(430))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(20), PadTop: vg.Points(10), PadBottom: vg.Points(10), PadLeft: vg.Points(10), PadRight: vg.Points(10)}
	canvases := plot.Align([][]*plot.Plot{{left, right}}, tiles, dc)
	left.Draw(canvases[0][0])
	right.Draw(canvases[0][1])
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// count writes 1000000 as 1M, 50000 as 50k.
func count(n float64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%gM", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%gk", n/1e3)
	}
	return fmt.Sprintf("%g", n)
}
