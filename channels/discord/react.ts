/**
 * A reaction as Discord's reactions route takes it, URL-encoded: a Unicode emoji as it is, a custom emoji
 * written `<:name:id>` or `<a:name:id>` as `name:id`.
 */
export function discordReactionPath(emoji: string): string {
  const text = emoji.trim();
  const custom = /^<a?:(\w{2,32}):(\d{15,25})>$/.exec(text);
  return encodeURIComponent(custom ? `${custom[1]}:${custom[2]}` : text);
}
