import { describe, expect, it } from 'vitest';
import { isTextLike, mediaKindOf, sniffMime } from '../../src/media/sniff.ts';

const head = (...parts: (string | number[])[]): Uint8Array =>
  Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p, 'latin1') : Buffer.from(p))));

describe('sniffMime', () => {
  it.each([
    ['image/jpeg', head([0xff, 0xd8, 0xff, 0xe0], 'JFIF')],
    ['image/png', head([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'IHDR')],
    ['image/gif', head('GIF89a', [1, 0, 1, 0])],
    ['image/webp', head('RIFF', [0, 0, 0, 0], 'WEBPVP8 ')],
    ['image/bmp', head('BM', [0x36, 0, 0, 0], [0, 0, 0, 0], [0x36, 0, 0, 0])],
    ['image/tiff', head([0x49, 0x49, 0x2a, 0x00, 8, 0, 0, 0])],
    ['image/tiff', head([0x4d, 0x4d, 0x00, 0x2a, 0, 0, 0, 8])],
    ['image/heic', head([0, 0, 0, 0x18], 'ftypheic', [0, 0, 0, 0], 'mif1')],
    ['image/avif', head([0, 0, 0, 0x1c], 'ftypavif', [0, 0, 0, 0])],
    ['application/pdf', head('%PDF-1.7\n')],
    ['application/zip', head([0x50, 0x4b, 0x03, 0x04, 0x14, 0])],
    ['application/gzip', head([0x1f, 0x8b, 0x08, 0])],
    ['audio/ogg; codecs=opus', head('OggS', Array(24).fill(0), 'OpusHead', [1, 1])],
    ['audio/ogg', head('OggS', Array(24).fill(0), [1], 'vorbis')],
    ['audio/mpeg', head('ID3', [4, 0, 0, 0, 0, 0, 0])],
    ['audio/mpeg', head([0xff, 0xfb, 0x90, 0x64])],
    ['audio/wav', head('RIFF', [0, 0, 0, 0], 'WAVEfmt ')],
    ['audio/flac', head('fLaC', [0, 0, 0, 0x22])],
    ['audio/mp4', head([0, 0, 0, 0x20], 'ftypM4A ', [0, 0, 0, 0])],
    ['video/mp4', head([0, 0, 0, 0x20], 'ftypisom', [0, 0, 2, 0])],
    ['video/quicktime', head([0, 0, 0, 0x14], 'ftypqt  ')],
    ['video/webm', head([0x1a, 0x45, 0xdf, 0xa3, 0x9f, 0x42, 0x86, 0x81, 0x01, 0x42, 0x82, 0x84], 'webm')],
    ['video/x-matroska', head([0x1a, 0x45, 0xdf, 0xa3, 0x93, 0x42, 0x82, 0x88], 'matroska')],
  ])('knows %s from its magic bytes', (mime, bytes) => {
    expect(sniffMime(bytes)).toBe(mime);
  });

  it('says nothing about text, unknown or too short data, nor about a UTF-16 byte order mark', () => {
    expect(sniffMime(head('hello world'))).toBeUndefined();
    expect(sniffMime(head([0xff, 0xd8]))).toBeUndefined();
    expect(sniffMime(new Uint8Array())).toBeUndefined();
    expect(sniffMime(head('RIFF', [0, 0, 0, 0], 'XXXX'))).toBeUndefined();
    expect(sniffMime(head([0xff, 0xfe], 'h\0i\0'))).toBeUndefined();
    expect(sniffMime(head([0xff, 0xfb, 0xf0, 0]))).toBeUndefined(); // bitrate index 15: not a frame
  });
});

describe('isTextLike', () => {
  it('takes text/*, JSON, CSV, markdown, XML, YAML by mime type, with or without parameters', () => {
    for (const mime of ['text/plain', 'text/csv; charset=utf-8', 'text/markdown', 'application/json', 'application/xml', 'application/yaml', 'application/vnd.api+json', 'image/svg+xml']) {
      expect(isTextLike(mime), mime).toBe(true);
    }
  });

  it('takes source code and text formats by the name when the platform says octet-stream', () => {
    for (const name of ['main.py', 'index.TS', 'notes.md', 'data.csv', 'config.yaml', 'lib.rs', 'Dockerfile', 'dir/sub/x.go', 'query.sql']) {
      expect(isTextLike('application/octet-stream', name), name).toBe(true);
    }
  });

  it('refuses binary formats and unknown names', () => {
    for (const [mime, name] of [['application/pdf', 'a.pdf'], ['image/png', 'a.png'], ['application/octet-stream', 'a.bin'], ['application/zip', undefined], ['application/octet-stream', 'README.docx']] as const) {
      expect(isTextLike(mime, name), `${mime} ${name}`).toBe(false);
    }
  });
});

describe('mediaKindOf', () => {
  it('sorts by the top-level type, documents for the rest', () => {
    expect(mediaKindOf('image/jpeg')).toBe('image');
    expect(mediaKindOf('Audio/Ogg; codecs=opus')).toBe('audio');
    expect(mediaKindOf('video/mp4')).toBe('video');
    expect(mediaKindOf('application/pdf')).toBe('document');
    expect(mediaKindOf('text/plain')).toBe('document');
  });
});
