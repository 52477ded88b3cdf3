package audio

import (
	"encoding/binary"
	"errors"
	"time"
)

// wavDuration reads a WAV recording's length: the bytes of its data chunk that are really
// there (a streamed file declares 0 or 0xFFFFFFFF) over the bytes a second its format plays.
func wavDuration(data []byte) (time.Duration, error) {
	var (
		format, channels, bits uint16
		rate, byteRate         uint32
		haveFormat             bool
	)
	for i := 12; i+8 <= len(data); {
		id, size := string(data[i:i+4]), uint64(binary.LittleEndian.Uint32(data[i+4:i+8]))
		body := data[i+8:]
		switch id {
		case "fmt ":
			if size < 16 || len(body) < 16 {
				return 0, errors.New("a short fmt chunk")
			}
			format, channels = binary.LittleEndian.Uint16(body[0:2]), binary.LittleEndian.Uint16(body[2:4])
			rate, byteRate = binary.LittleEndian.Uint32(body[4:8]), binary.LittleEndian.Uint32(body[8:12])
			bits = binary.LittleEndian.Uint16(body[14:16])
			haveFormat = true
		case "data":
			if !haveFormat {
				return 0, errors.New("data before its format")
			}
			n := uint64(len(body))
			if size != 0 && size != 0xFFFFFFFF && size < n {
				n = size
			}
			perSecond := uint64(byteRate)
			if format == 1 || format == 3 || format == 0xFFFE { // PCM, float, extensible
				perSecond = uint64(rate) * uint64(channels) * uint64((bits+7)/8)
			}
			if perSecond == 0 {
				return 0, errors.New("a format that plays no bytes a second")
			}
			return span(n, perSecond), nil
		}
		i += 8 + int(min(size+size&1, uint64(len(data))))
	}
	return 0, errors.New("no data chunk")
}
