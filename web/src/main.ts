import { Api } from "./api.js";
import { mountChatTab } from "./chat/chat-tab.js";
import { mountDecisionsTab } from "./decisions/decisions-tab.js";
import { byId } from "./dom.js";
import { KeyStore } from "./key-store.js";
import { ModelList, mountModelsTab } from "./models.js";

const TABS = ["chat", "decisions", "models"] as const;

function storage(): Storage | undefined {
  try {
    return window.sessionStorage;
  } catch {
    return undefined; // storage disabled: the key stays in memory
  }
}

/** Tabs as buttons (arrow keys move between them); the URL hash keeps the tab on reload. */
function mountTabs(): void {
  const buttons = TABS.map((name) => byId<HTMLButtonElement>(`tab-${name}`));
  const select = (name: (typeof TABS)[number], focus = false) => {
    TABS.forEach((tab, i) => {
      const on = tab === name;
      buttons[i]!.setAttribute("aria-selected", String(on));
      buttons[i]!.tabIndex = on ? 0 : -1;
      byId(`panel-${tab}`).hidden = !on;
      if (on && focus) buttons[i]!.focus();
    });
    if (location.hash !== `#${name}`) history.replaceState(null, "", `#${name}`);
  };
  buttons.forEach((button, i) => {
    button.addEventListener("click", () => select(TABS[i]!));
    button.addEventListener("keydown", (event) => {
      const step = event.key === "ArrowRight" ? 1 : event.key === "ArrowLeft" ? -1 : 0;
      if (step !== 0) select(TABS[(i + step + TABS.length) % TABS.length]!, true);
    });
  });
  const fromHash = TABS.find((tab) => `#${tab}` === location.hash);
  select(fromHash ?? "chat");
}

function main(): void {
  const keys = new KeyStore(storage());
  const api = new Api(keys);
  const models = new ModelList(api);
  mountTabs();
  mountChatTab(api, models);
  mountDecisionsTab(api, models);
  mountModelsTab(models);

  const keyInput = byId<HTMLInputElement>("api-key");
  const remember = byId<HTMLInputElement>("remember-key");
  keyInput.value = keys.key;
  remember.checked = keys.remember;
  keyInput.addEventListener("input", () => keys.set(keyInput.value));
  remember.addEventListener("change", () => keys.setRemember(remember.checked));
  keys.onChange(() => {
    if (keys.key !== "") models.loadSoon(300);
    else models.cancelSoon();
  });
  if (keys.key !== "") void models.load();
  else keyInput.focus();
}

main();
