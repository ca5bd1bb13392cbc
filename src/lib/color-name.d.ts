// Types for color-name@2.1.1, which ships none: the CSS named colours, lower case, as [r, g, b].
declare module 'color-name' {
  const colors: Readonly<Record<string, readonly [number, number, number]>>;
  export default colors;
}
