//! Rendering an analysed run for people: a self-contained HTML page with inline SVG charts
//! ([`html`]), and the same numbers as a terminal summary ([`text`]). Pure: strings out.

pub mod compare;
pub mod html;
pub mod rehearsal;
pub mod svg;
pub mod text;
pub mod tune;

pub use html::render;
pub use text::summary;

#[cfg(test)]
mod tests;
