//! Placeholder: this capability is being built (see the open issue); the module is declared
//! here so that the workspace layout is fixed.
