//! A server's tools and resources as buddy skills, and the toolbox that holds them.

pub(crate) mod annotations;
pub(crate) mod resource_skill;
pub(crate) mod retry;
pub(crate) mod skill;
pub(crate) mod toolbox;
