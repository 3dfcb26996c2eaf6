//! sqlgen
