/**
 * Tiny PDFs written by hand for the media tests: real files pdf.js reads (one font, text on each page), a
 * truncated one, and one whose content stream is huge.
 */

function escapePdf(text: string): string {
  return text.replace(/[\\()]/g, (c) => `\\${c}`);
}

/** A valid PDF with one page per entry of `pages`, each showing its text (lines split on `\n`). */
export function makePdf(pages: readonly string[], options: { contentOf?: (page: number, text: string) => string } = {}): Buffer {
  const objects: string[] = [];
  const pageIds = pages.map((_, i) => 4 + i * 2);
  objects[1] = '<< /Type /Catalog /Pages 2 0 R >>';
  objects[2] = `<< /Type /Pages /Kids [${pageIds.map((id) => `${id} 0 R`).join(' ')}] /Count ${pages.length} >>`;
  objects[3] = '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>';
  pages.forEach((text, i) => {
    const id = pageIds[i]!;
    const content = options.contentOf?.(i, text)
      ?? `BT /F1 12 Tf 14 TL 72 720 Td ${text.split('\n').map((line) => `(${escapePdf(line)}) Tj T*`).join(' ')} ET`;
    objects[id] = `<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents ${id + 1} 0 R >>`;
    objects[id + 1] = `<< /Length ${Buffer.byteLength(content, 'latin1')} >>\nstream\n${content}\nendstream`;
  });
  let out = '%PDF-1.4\n%\xe2\xe3\xcf\xd3\n';
  const offsets: number[] = [];
  for (let id = 1; id < objects.length; id++) {
    offsets[id] = Buffer.byteLength(out, 'latin1');
    out += `${id} 0 obj\n${objects[id]!}\nendobj\n`;
  }
  const xref = Buffer.byteLength(out, 'latin1');
  out += `xref\n0 ${objects.length}\n0000000000 65535 f \n`;
  for (let id = 1; id < objects.length; id++) out += `${String(offsets[id]).padStart(10, '0')} 00000 n \n`;
  out += `trailer\n<< /Size ${objects.length} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, 'latin1');
}

/** A PDF whose one page draws the same text `repeat` times: a content stream of many megabytes. */
export function hugePdf(repeat: number): Buffer {
  return makePdf(['x'], { contentOf: () => `BT /F1 12 Tf 72 720 Td ${'(loop forever and ever) Tj 0 -1 Td '.repeat(repeat)} ET` });
}
