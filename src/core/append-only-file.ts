import { closeSync, openSync, writeSync } from 'node:fs';

/**
 * A file kept open in append mode, written synchronously. Small appends to the page cache take a few
 * microseconds this way, where an async `appendFile` (open, write, close on the thread pool, three promise
 * round trips) costs several times more per line on a busy gateway. The file is opened on first use.
 */
export class AppendOnlyFile {
  readonly path: string;
  private fd: number | undefined;

  /** `fd`: a descriptor already open for writing at the end of `path` (a file just created), adopted. */
  constructor(path: string, fd?: number) {
    this.path = path;
    this.fd = fd;
  }

  /** Appends the whole text; throws the file system's error (ENOSPC, EACCES...). */
  append(text: string): void {
    this.fd ??= openSync(this.path, 'a');
    const buffer = Buffer.from(text, 'utf8');
    let offset = 0;
    while (offset < buffer.length) offset += writeSync(this.fd, buffer, offset, buffer.length - offset);
  }

  close(): void {
    if (this.fd === undefined) return;
    const fd = this.fd;
    this.fd = undefined;
    closeSync(fd);
  }
}
