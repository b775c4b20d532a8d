//! The steps of the main job, each shared by the command that runs it alone and by `run`
//! (commands never import one another).

pub(crate) mod analysis;
pub(crate) mod load;
pub(crate) mod manifests;
pub(crate) mod prompts;
pub(crate) mod rehearse;
pub(crate) mod replica;
pub(crate) mod server_view;
pub(crate) mod tune;
