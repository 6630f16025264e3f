//go:build !unix

package hostfile

import "os"

const oNoFollow = 0

func owner(os.FileInfo) (int, bool) { return 0, false }

const oNonBlock = 0
