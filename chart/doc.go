// Package chart draws every chart of tuner from one description per chart
// and one renderer per format.
//
// A chart is a Figure: panels (axes, series, SLO rules) or a parallel-
// coordinates view, built by one function per chart kind: Front (the
// Pareto front), Curve (QPS against latency), History (a metric over
// benchmark runs), Breakdown (where the request time goes), Trace (a
// feedback-load run), Progress (a study's optimisation history),
// Importance (the searched flags' importance) and ParallelCoordinates.
//
// Write draws a figure as SVG or PNG with gonum.org/v1/plot (ticks on round
// steps with units, a panel per axis pair, the legend beside the panels);
// WriteHTML as a self-contained interactive page with go-echarts, ECharts
// inlined from an embedded copy so that the page makes no network request
// (GPU machines are often offline). Both renderers take the same series,
// colours, markers and label placement, so a legend sample always has the
// colour and shape of its markers. SVGMarkers and SVGLegend read a written
// SVG back for tests.
package chart
