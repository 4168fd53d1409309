/**
 * What a file is, from its first bytes and its name (SPEC §15): platforms report a mime type the sender chose,
 * so the media intake trusts the bytes where they tell.
 */

function ascii(head: Uint8Array, offset: number, text: string): boolean {
  if (head.length < offset + text.length) return false;
  for (let i = 0; i < text.length; i++) if (head[offset + i] !== text.charCodeAt(i)) return false;
  return true;
}

function bytes(head: Uint8Array, offset: number, expected: readonly number[]): boolean {
  if (head.length < offset + expected.length) return false;
  return expected.every((b, i) => head[offset + i] === b);
}

/** ISO base media (`ftyp` box) brands → mime. */
function ftypMime(head: Uint8Array): string | undefined {
  if (!ascii(head, 4, 'ftyp') || head.length < 12) return undefined;
  const brand = String.fromCharCode(...head.subarray(8, 12)).trim().toLowerCase();
  if (brand === 'avif' || brand === 'avis') return 'image/avif';
  if (['heic', 'heix', 'hevc', 'hevx', 'heim', 'heis', 'mif1', 'msf1'].includes(brand)) return 'image/heic';
  if (brand === 'm4a' || brand === 'm4b' || brand === 'm4p') return 'audio/mp4';
  if (brand === 'qt') return 'video/quicktime';
  if (brand.startsWith('3g')) return 'video/3gpp';
  return 'video/mp4';
}

/**
 * MPEG audio frame header: 11 sync bits, a valid version, layer III or II (layer I, which nobody sends, would
 * also match a UTF-16 byte order mark), a bitrate index that is not 15, a valid sample rate.
 */
function isMpegFrame(head: Uint8Array): boolean {
  if (head.length < 3 || head[0] !== 0xff) return false;
  const b1 = head[1]!;
  const b2 = head[2]!;
  return (b1 & 0xe0) === 0xe0 && (b1 & 0x18) !== 0x08 && (b1 & 0x06) !== 0 && (b1 & 0x06) !== 0x06 && (b2 & 0xf0) !== 0xf0 && (b2 & 0x0c) !== 0x0c;
}

/**
 * The mime type the magic bytes at the start of a file announce; undefined when they announce none this
 * function knows. Pass at least the first 64 bytes.
 */
export function sniffMime(head: Uint8Array): string | undefined {
  if (bytes(head, 0, [0xff, 0xd8, 0xff])) return 'image/jpeg';
  if (bytes(head, 0, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return 'image/png';
  if (ascii(head, 0, 'GIF87a') || ascii(head, 0, 'GIF89a')) return 'image/gif';
  if (ascii(head, 0, 'RIFF') && ascii(head, 8, 'WEBP')) return 'image/webp';
  if (ascii(head, 0, 'RIFF') && ascii(head, 8, 'WAVE')) return 'audio/wav';
  if (ascii(head, 0, 'RIFF') && ascii(head, 8, 'AVI ')) return 'video/x-msvideo';
  if (ascii(head, 0, 'BM') && head.length >= 14 && bytes(head, 6, [0, 0, 0, 0])) return 'image/bmp';
  if (bytes(head, 0, [0x49, 0x49, 0x2a, 0x00]) || bytes(head, 0, [0x4d, 0x4d, 0x00, 0x2a])) return 'image/tiff';
  if (ascii(head, 0, '%PDF-')) return 'application/pdf';
  if (bytes(head, 0, [0x50, 0x4b, 0x03, 0x04]) || bytes(head, 0, [0x50, 0x4b, 0x05, 0x06])) return 'application/zip';
  if (bytes(head, 0, [0x1f, 0x8b])) return 'application/gzip';
  if (ascii(head, 0, 'OggS')) {
    // The first page's packet says which codec: Opus voice notes (Telegram) vs Vorbis.
    const text = String.fromCharCode(...head.subarray(28, Math.min(head.length, 40)));
    return text.startsWith('OpusHead') ? 'audio/ogg; codecs=opus' : 'audio/ogg';
  }
  if (ascii(head, 0, 'fLaC')) return 'audio/flac';
  if (ascii(head, 0, 'ID3') || isMpegFrame(head)) return 'audio/mpeg';
  if (bytes(head, 0, [0x1a, 0x45, 0xdf, 0xa3])) {
    const text = String.fromCharCode(...head.subarray(0, Math.min(head.length, 64)));
    return text.includes('webm') ? 'video/webm' : 'video/x-matroska';
  }
  return ftypMime(head);
}

const TEXT_MIMES = new Set([
  'application/json', 'application/ld+json', 'application/xml', 'application/x-yaml', 'application/yaml', 'application/toml',
  'application/javascript', 'application/x-javascript', 'application/typescript', 'application/x-sh', 'application/x-shellscript',
  'application/sql', 'application/graphql', 'application/x-ndjson', 'application/csv', 'application/x-python', 'application/x-httpd-php',
  'application/x-tex', 'application/rtf', 'image/svg+xml',
]);

const TEXT_EXTENSIONS = new Set([
  'txt', 'text', 'md', 'markdown', 'rst', 'adoc', 'org', 'csv', 'tsv', 'json', 'jsonl', 'ndjson', 'json5', 'xml', 'yaml', 'yml', 'toml',
  'ini', 'cfg', 'conf', 'env', 'properties', 'log', 'html', 'htm', 'css', 'scss', 'less', 'svg', 'tex', 'bib',
  'js', 'mjs', 'cjs', 'jsx', 'ts', 'mts', 'cts', 'tsx', 'py', 'pyi', 'rb', 'go', 'rs', 'java', 'kt', 'kts', 'scala', 'swift', 'c', 'h',
  'cc', 'cpp', 'cxx', 'hpp', 'hh', 'cs', 'fs', 'php', 'pl', 'pm', 'lua', 'r', 'jl', 'dart', 'ex', 'exs', 'erl', 'hs', 'ml', 'clj',
  'sh', 'bash', 'zsh', 'fish', 'ps1', 'bat', 'sql', 'graphql', 'gql', 'proto', 'vue', 'svelte', 'astro', 'tf', 'hcl', 'nix',
  'gradle', 'cmake', 'mk', 'dockerfile', 'diff', 'patch', 'gitignore', 'editorconfig', 'lock',
]);

const TEXT_FILE_NAMES = new Set(['dockerfile', 'makefile', 'license', 'readme', 'changelog', 'gemfile', 'procfile', 'justfile']);

/** The bare type of a mime string: lowercase, parameters dropped. */
export function baseMime(mime: string): string {
  return mime.split(';')[0]!.trim().toLowerCase();
}

/**
 * Whether a file is text to inline for the model (SPEC §15): `text/*`, JSON, CSV, markdown, XML, YAML and
 * other text formats by mime type, or source code and text formats by the name's extension. Says nothing about
 * the bytes: the reader still refuses binary data.
 */
export function isTextLike(mime: string, name?: string): boolean {
  const type = baseMime(mime);
  if (type.startsWith('text/') || TEXT_MIMES.has(type) || type.endsWith('+json') || type.endsWith('+xml')) return true;
  if (!name) return false;
  const base = name.replace(/^.*[\\/]/, '').toLowerCase();
  if (TEXT_FILE_NAMES.has(base)) return true;
  const dot = base.lastIndexOf('.');
  return dot >= 0 && TEXT_EXTENSIONS.has(base.slice(dot + 1));
}

/** The kind of media a mime type is; anything that is not an image, audio or video is a document. */
export function mediaKindOf(mime: string): 'image' | 'audio' | 'video' | 'document' {
  const type = baseMime(mime);
  if (type.startsWith('image/')) return 'image';
  if (type.startsWith('audio/')) return 'audio';
  if (type.startsWith('video/')) return 'video';
  return 'document';
}
