/**
 * Element helpers. Text from the server or the model only ever becomes text nodes
 * (`textContent`), never markup: nothing here parses HTML.
 */
export type Child = Node | string | number | null | undefined | false;

export interface ElementProps {
  class?: string;
  testid?: string;
  text?: string;
  title?: string;
  attrs?: Record<string, string>;
}

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: ElementProps = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (props.class !== undefined) node.className = props.class;
  if (props.testid !== undefined) node.dataset["testid"] = props.testid;
  if (props.title !== undefined) node.title = props.title;
  if (props.attrs !== undefined) for (const [name, value] of Object.entries(props.attrs)) node.setAttribute(name, value);
  if (props.text !== undefined) node.textContent = props.text;
  append(node, ...children);
  return node;
}

export function append(parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : child);
  }
}

/** The element with this id, or an error naming it (the page's markup is fixed). */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const node = document.getElementById(id);
  if (node === null) throw new Error(`the page has no #${id}`);
  return node as T;
}

export function clear(node: Node): void {
  while (node.firstChild !== null) node.removeChild(node.firstChild);
}

/** `12.3%`, from a probability. */
export function percent(p: number): string {
  return `${(p * 100).toFixed(1)}%`;
}
