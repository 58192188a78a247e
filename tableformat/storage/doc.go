/*
Package storage is the storage seam of a tsflight table.

A table never touches the operating system directly: every read, write,
rename, link and directory sync it performs goes through an [FS]. That one
narrow interface is what lets the same commit code run against a real disk in
production and against a simulated disk in tests that cut the power at every
step of a commit, or make two writers race for the same name.

The package provides three implementations:

  - [LocalFS], returned by [Local], works on a directory of the local file
    system.

  - [MemFS], returned by [NewMem], keeps everything in memory and models
    durability strictly: it remembers, separately from what a reader sees
    now, which file contents were made durable by [File.Sync] and which
    directory entries were made durable by [FS.SyncDir].
    [MemFS.CrashClone] returns what a power loss would leave behind.

  - [FaultFS], returned by [NewFaultFS], wraps another FS, records every call
    in a trace, and injects errors or a crash at chosen calls. A crash cuts
    the wrapped FS off: from then on nothing reaches it.

# Core types

[FS] names files by path and has the primitives a crash-safe commit is built
from: Create and CreateExclusive return a [File] to write, Link and Rename
publish a name, Remove deletes one, and SyncDir makes the names of a directory
durable. Open returns a [Reader] for random access, Stat a [FileInfo].

Missing files are reported with errors satisfying [IsNotExist], names that
already exist (for CreateExclusive and Link) with errors satisfying [IsExist].
A path that is not valid is rejected with an error wrapping [ErrInvalidPath]
before anything is touched. Every call on a [FaultFS] after an injected crash
fails with an error wrapping [ErrCrashed].

# Paths

Paths are slash-separated, relative to the root of the FS, and must satisfy
[io/fs.ValidPath]: no leading or trailing slash, no empty, "." or ".."
elements; "." alone names the root. They are the same on every operating
system; [LocalFS] converts them to local paths under its root. Because ".."
and absolute paths are rejected, no path can name a file outside the root
(LocalFS does follow symbolic links that already exist under the root).

# Caveats

Nothing is durable until it is synced, and there are two separate things to
sync. The content of a file is durable once [File.Sync] has returned; its
name, in the directory that holds it, is durable once [FS.SyncDir] of that
directory has returned after the name was created. A rename or link needs
SyncDir on the directory of the new name, and a rename across directories
also on that of the old one. [File.Close] does not sync.

No method is atomic beyond what its comment promises. Rename replaces its
target atomically, and Link and CreateExclusive fail with fs.ErrExist rather
than replace anything, so either can publish a name exclusively.

MemFS keeps its model simple: directories themselves (MkdirAll, the implicit
creation of parents, and the rename or removal of a directory) are durable at
once; only the files in them follow the rules above.
*/
package storage
