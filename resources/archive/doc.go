// Package archive is the `archive` resource type: it downloads a tar,
// tar.gz (tgz) or zip archive over http or https and extracts it.
//
// Properties (CCM's names): url, headers, username and password (HTTP basic
// auth), checksum (sha256, hex), extract_parent, creates, cleanup, owner and
// group. The name is the absolute path the archive is saved to; its
// extension must match the url's.
//
// Check: with creates set and existing, nothing is done (no request is
// made). Otherwise the archive is downloaded when it is missing or its
// sha256 differs from checksum; it is extracted into extract_parent when it
// was downloaded or creates is missing; cleanup then removes it; an
// existing archive whose owner or group differs is chowned. Noop makes no
// request. ensure absent removes the archive file, never what was
// extracted.
//
// Safety: a download goes to a temporary file beside the name, bounded by
// MaxDownloadBytes, checked against checksum (ErrChecksum) and only then
// renamed into place. Extraction never runs an external tool: entries are
// written with Go's archive readers through an os.Root into a private
// temporary directory beside extract_parent, bounded by MaxExtractBytes and
// MaxEntries (ErrTooLarge). An entry with an absolute name or a ".." that
// climbs out, a symbolic link whose target is absolute or resolves outside
// the tree (following the other links of the archive), or a hard link to
// outside fails the resource with ErrEscape; devices and fifos with
// ErrUnsupportedEntry. Only a complete, checked tree is moved into place,
// by descriptor (package safefs): one rename when extract_parent does not
// exist; otherwise entry by entry, merging into existing directories (which
// keep their mode and owner) and replacing files and links (never following
// a link already there). On any failure the temporary directory is removed
// and extract_parent is as it was. A symlinked extract_parent is refused
// (ErrLinkedParent), never followed nor replaced.
//
// Interruptions: the temporary tree (".NAME.manifold-extract-<random>"
// beside extract_parent) is flocked while it exists; an unlocked one is
// what a killed extraction left, and makes the next check report a change
// even when creates exists: the run removes it and extracts again. With
// extract_parent the downloaded archive is renamed into place only after
// its extraction, and a failed extraction removes it, so a refused archive
// is refused again at the next run rather than reported stable. Setuid, setgid and sticky bits are dropped; entries are owned by
// owner and group when set, else by the worker's user (never by the ids
// recorded in the archive).
package archive
