//! One module per subcommand; each resolves its flags and calls into the libraries.

pub(crate) mod load;
pub(crate) mod scrape;
pub(crate) mod sim;
