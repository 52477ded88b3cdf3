package media

// OrDefault returns the limit v, or d when v is left at zero (or set below it): how every limit
// of reading media takes its default (a PDF's, the reader process's, the pipeline's media
// options).
func OrDefault[T ~int | ~int64 | ~float64](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}
