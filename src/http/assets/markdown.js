// Markdown from the model and the people, rendered safely: markdown-it with raw HTML off (it is shown as
// text), no images (nothing loads from elsewhere), links only to safe schemes and opened in a new tab.
import markdownit from '/assets/vendor/markdown-it.mjs';

const md = markdownit({ html: false, linkify: true, breaks: true });
md.disable('image');
const linkOpen = md.renderer.rules.link_open ?? ((tokens, i, options, env, self) => self.renderToken(tokens, i, options));
md.renderer.rules.link_open = (tokens, i, options, env, self) => {
  tokens[i].attrSet('target', '_blank');
  tokens[i].attrSet('rel', 'noopener noreferrer nofollow');
  return linkOpen(tokens, i, options, env, self);
};

// Aligned table columns: markdown-it writes style="text-align:…", which the page's CSP (style-src 'self')
// refuses; a class does the same through dashboard.css.
md.core.ruler.push('align_class', (state) => {
  for (const token of state.tokens) {
    if (token.type !== 'th_open' && token.type !== 'td_open') continue;
    const align = /^text-align:\s*(left|center|right)$/.exec(token.attrGet('style') ?? '')?.[1];
    if (!token.attrs) continue;
    token.attrs = token.attrs.filter(([name]) => name !== 'style');
    if (align) token.attrJoin('class', `align-${align}`);
  }
});

/** Renders `text` as markdown into `el` (class `md`). */
export function renderMarkdown(el, text) {
  el.classList.add('md');
  el.innerHTML = md.render(text ?? '');
  return el;
}
