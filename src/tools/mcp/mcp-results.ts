/** One content block of an MCP tool result, as far as we read it. */
interface ContentBlock {
  type: string;
  text?: string;
  data?: string;
  mimeType?: string;
  uri?: string;
  name?: string;
  /** A resource link's size in bytes, when the server knows it. */
  size?: number;
  resource?: { uri?: string; mimeType?: string; text?: string; blob?: string };
}

/** What `tools/call` answers (the SDK has checked its shape). */
export interface McpCallResult {
  content?: ContentBlock[];
  structuredContent?: unknown;
  isError?: boolean;
}

const base64Bytes = (data: string | undefined) => (data ? Math.floor((data.length * 3) / 4) - (data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0) : 0);
const n = (v: number) => v.toLocaleString('en-US');

/**
 * An MCP tool result as the tool message the model reads: text blocks verbatim, images, audio and resources
 * described in words (kind, type, size, uri) instead of dropped silently, structured content as JSON when
 * there is no text. A result the server marks as an error says so.
 */
export function describeMcpResult(result: McpCallResult): string {
  const parts: string[] = [];
  for (const block of result.content ?? []) {
    switch (block.type) {
      case 'text':
        parts.push(block.text ?? '');
        break;
      case 'image':
      case 'audio':
        parts.push(`[${block.type}: ${block.mimeType ?? 'unknown type'}, ${n(base64Bytes(block.data))} bytes, not shown]`);
        break;
      case 'resource': {
        const r = block.resource ?? {};
        const size = r.text !== undefined ? `${n(r.text.length)} characters` : `${n(base64Bytes(r.blob))} bytes`;
        parts.push(`[resource: ${r.uri ?? 'no uri'}, ${r.mimeType ?? 'unknown type'}, ${size}]`);
        break;
      }
      case 'resource_link':
        parts.push(`[resource link: ${block.uri ?? 'no uri'}${block.name ? ` (${block.name})` : ''}${block.mimeType ? `, ${block.mimeType}` : ''}${typeof block.size === 'number' && Number.isFinite(block.size) && block.size >= 0 ? `, ${n(block.size)} bytes` : ''}]`);
        break;
      default:
        parts.push(`[${String(block.type).slice(0, 40)} content, not shown]`);
    }
  }
  if (!parts.length && result.structuredContent !== undefined) parts.push(JSON.stringify(result.structuredContent));
  const text = parts.join('\n') || '(no content)';
  return result.isError ? `Error from the tool: ${text}` : text;
}
