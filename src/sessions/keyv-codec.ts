import { defaultDeserialize, defaultSerialize } from '@keyv/serialize';

/**
 * keyv's stored form of a value, byte for byte what keyv's default serializer writes, at the cost of one
 * `JSON.stringify` for the usual value. keyv escapes every string that starts with `:` (and writes Buffers as
 * `:base64:` strings); such values, rare in a session entry, go through keyv's own serializer.
 */
export function serializeKeyv(data: { value?: unknown; expires?: number | null }): string {
  const json = JSON.stringify(data);
  return json === undefined || COLON_STRING.test(json) || json.includes(BUFFER_JSON) ? defaultSerialize(data) : json;
}

/** keyv's stored form read back: `JSON.parse` unless the text holds a string keyv escaped. */
export function deserializeKeyv<T>(text: string): T {
  return (COLON_STRING.test(text) ? defaultDeserialize(text) : JSON.parse(text)) as T;
}

/**
 * A JSON string token that starts with `:` (after `[`, `,` or `:`, whitespace allowed). Inside a string a
 * quote is always escaped, so this never matches string content; a key that ends in one of those characters
 * only sends the value down the slower, equally correct path.
 */
const COLON_STRING = /[[,:][ \t\n\r]*":/;

/** How `JSON.stringify` writes a Buffer (keyv writes it as a `:base64:` string instead). */
const BUFFER_JSON = '{"type":"Buffer","data":[';
